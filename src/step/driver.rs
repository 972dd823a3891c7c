//! The process's side of a step-mode run: the session it drives, the
//! views it publishes, the commands it pops and answers, and the
//! checker's shortest way played step by step.

use std::time::Instant;

use redis::AsyncCommands;

use super::{
    Command, Envelope, IDLE, LEASE_MS, MAX_GATES, POLL, STEP_TIMEOUT, StepVerdict, StepView, key,
    plan,
};
use crate::check;
use crate::explore::{Choice, Options, Redises, Session, Setup};
use crate::harness::stack::Stack;
use crate::store::Store;
use crate::variants::{Scenario, Variant};

/// The process's side of one run.
pub(super) struct Driver {
    pub(super) store: Store,
    pub(super) id: String,
    pub(super) variant: Variant,
    pub(super) scenario: Scenario,
    pub(super) buyers: u8,
    pub(super) version: u64,
    /// The shortest way (once asked for), how much of it was played, and
    /// whether the learner took a step of their own (it then no longer
    /// applies).
    pub(super) plan: Option<Result<Vec<plan::Hint>, String>>,
    pub(super) played: usize,
    pub(super) off_plan: bool,
}

impl Driver {
    pub(super) async fn drive(
        mut self,
        stack: &Stack,
        redis_url: &str,
        first: tokio::sync::oneshot::Sender<anyhow::Result<StepView>>,
    ) {
        let setup = Setup {
            run_id: format!("step-{}", self.id),
            sku: format!("step-{}", self.id),
            lease_ms: LEASE_MS,
            buyers: self.buyers,
        };
        let redises = Redises::one(redis_url);
        let cell = (self.variant, self.scenario);
        let mut session = match Session::start(stack, &redises, cell, setup, 0).await {
            Ok(session) => session,
            Err(err) => {
                let _ = first.send(Err(err));
                return;
            }
        };
        let mut first = Some(first);
        // The reply owed for the last step, sent with the view after it.
        let mut owed: Option<String> = None;
        let outcome = async {
            loop {
                session.be_patient(IDLE).await?;
                let Some(options) = session.next().await? else {
                    return anyhow::Ok(owed.take());
                };
                let view = self.view(&mut session, &options).await;
                let view = self.publish(view).await?;
                if let Some(first) = first.take() {
                    let _ = first.send(Ok(view.clone()));
                }
                if let Some(reply) = owed.take() {
                    self.reply(&reply, Ok(&view)).await?;
                }
                // The learner thinks: the buyers live on meanwhile.
                let since = Instant::now();
                let (reply, command) = loop {
                    if let Some(envelope) = self.pop().await? {
                        break (Some(envelope.reply), envelope.command);
                    }
                    if since.elapsed() > IDLE {
                        break (None, Command::End);
                    }
                    session.wait(POLL).await?;
                };
                match command {
                    Command::Take(choice) if options.offers(&choice) => {
                        session.take(choice).await?;
                        self.off_plan = true;
                        owed = reply;
                    }
                    Command::Shortest => match self.shortest(&mut session, &options).await? {
                        Ok(()) => owed = reply,
                        Err(said) => {
                            if let Some(reply) = reply {
                                self.reply(&reply, Err(said)).await?;
                            }
                        }
                    },
                    Command::Take(choice) => {
                        if let Some(reply) = reply {
                            let said = format!("{choice:?} is not a step offered now");
                            self.reply(&reply, Err(said)).await?;
                        }
                    }
                    Command::End => return Ok(reply),
                }
            }
        }
        .await;
        let (outcome, owed) = match outcome {
            Ok(owed) => (Ok(()), owed),
            Err(err) => (Err(err), owed),
        };
        // The stores as the schedule left them, before its buyers are let
        // go (a crashed one too: it would go on, as nobody holds it).
        let (lanes, state, fence) = (
            session.lanes_seen().await,
            session.state().await.ok(),
            session.fence().await,
        );
        let sku = session.sku().to_owned();
        let finished = session.finish(outcome).await;
        let mut view = StepView {
            lanes,
            state,
            fence,
            over: true,
            ..self.blank(&sku)
        };
        match finished {
            Ok(schedule) => {
                view.steps = schedule.steps.clone();
                let (variant, scenario) = (self.variant, self.scenario);
                let model = tokio::task::spawn_blocking(move || check::check(variant, scenario))
                    .await
                    .ok()
                    .flatten();
                let par = self.par(schedule.violation, view.steps.len()).await;
                view.verdict = Some(StepVerdict {
                    violation: schedule.violation,
                    ledger: schedule.ledger,
                    ledger_zh: schedule.ledger_zh,
                    checker_breaks: model
                        .as_ref()
                        .and_then(|m| m.broken.map(|p| p.name().to_owned())),
                    checker_breaks_zh: model.as_ref().and_then(|m| m.broken_zh.map(str::to_owned)),
                    checker_states: model.as_ref().map_or(0, |m| m.states),
                    checker_steps: model.filter(|m| m.broken.is_some()).map(|m| m.trace.len()),
                    par,
                    history: schedule.history,
                    disagreement: schedule.disagreement,
                    history_zh: schedule.history_zh,
                    disagreement_zh: schedule.disagreement_zh,
                });
            }
            Err(err) => view.error = Some(format!("{err:#}")),
        }
        let view = match self.publish(view).await {
            Ok(view) => view,
            Err(err) => {
                tracing::warn!(
                    "step mode: run {} could not publish its end: {err:#}",
                    self.id
                );
                return;
            }
        };
        if let Some(first) = first.take() {
            let _ = first.send(match &view.error {
                Some(error) => Err(anyhow::anyhow!("{error}")),
                None => Ok(view.clone()),
            });
        }
        if let Some(reply) = owed {
            let _ = self.reply(&reply, Ok(&view)).await;
        }
    }

    fn blank(&self, sku: &str) -> StepView {
        StepView {
            id: self.id.clone(),
            variant: self.variant.name().to_owned(),
            scenario: self.scenario.name().to_owned(),
            sku: sku.to_owned(),
            version: 0,
            lanes: Vec::new(),
            releases: Vec::new(),
            faults: Vec::new(),
            steps: Vec::new(),
            state: None,
            fence: None,
            over: false,
            shortest: self.shortest_played(),
            by_checker: self.played > 0 && !self.off_plan,
            verdict: None,
            error: None,
        }
    }

    async fn view(&self, session: &mut Session<'_>, options: &Options) -> StepView {
        StepView {
            lanes: session.lanes_seen().await,
            releases: options.releases.clone(),
            faults: options.faults.clone(),
            steps: session.steps().to_vec(),
            state: session.state().await.ok(),
            fence: session.fence().await,
            ..self.blank(session.sku())
        }
    }

    /// The cell's par: a run that was the checker's whole way and broke the
    /// cell sets it (its `steps`); any run reads it.
    async fn par(&self, violation: bool, steps: usize) -> Option<usize> {
        let key = super::par_key(self.variant, self.scenario);
        let whole = matches!(self.shortest_played(), Some((played, of)) if played == of);
        let mut conn = self.store.conn().await.ok()?;
        if whole && !self.off_plan && violation {
            let _: Result<(), _> = conn.set(&key, steps).await;
            return Some(steps);
        }
        conn.get(&key).await.ok().flatten()
    }

    /// How far the checker's shortest way was played, of how many steps.
    fn shortest_played(&self) -> Option<(usize, usize)> {
        match &self.plan {
            Some(Ok(hints)) => Some((self.played, hints.len())),
            _ => None,
        }
    }

    /// Publishes `view` as the run's last, numbered after the one before.
    async fn publish(&mut self, mut view: StepView) -> anyhow::Result<StepView> {
        self.version += 1;
        view.version = self.version;
        let mut conn = self.store.conn().await?;
        let json = serde_json::to_string(&view)?;
        let _: () = conn
            .set_ex(key(&self.id, "view"), json, 2 * IDLE.as_secs())
            .await?;
        Ok(view)
    }

    /// Plays the next step of the shortest way: `Err` with why not (the
    /// learner took steps of their own, the live run went its own way, it
    /// was played to its end, the checker has none).
    async fn shortest(
        &mut self,
        session: &mut Session<'_>,
        options: &Options,
    ) -> anyhow::Result<Result<(), String>> {
        if self.off_plan {
            return Ok(Err(
                "the shortest way starts from the start: begin again, then follow it".to_owned(),
            ));
        }
        if self.plan.is_none() {
            let (variant, scenario) = (self.variant, self.scenario);
            let planned =
                tokio::task::spawn_blocking(move || plan::plan(variant, scenario)).await?;
            self.plan = Some(planned.map(|(hints, _)| hints));
        }
        let hint = match &self.plan {
            Some(Ok(hints)) => match hints.get(self.played) {
                Some(hint) => hint.clone(),
                None => return Ok(Err("the shortest way was played to its end".to_owned())),
            },
            Some(Err(why)) => return Ok(Err(why.clone())),
            None => return Ok(Err("no shortest way".to_owned())),
        };
        let astray = |what: String| Ok(Err(format!("the live run went its own way: {what}")));
        match hint {
            plan::Hint::Strike(choice) => {
                if !options.offers(&choice) {
                    return astray(format!("{choice:?} cannot strike now"));
                }
                session.take(choice).await?;
            }
            plan::Hint::Advance { buyer, gate } => {
                // Through the gates the model has no step for, to its own.
                let mut options = options.clone();
                for passed in 0.. {
                    if passed == MAX_GATES {
                        return astray(format!(
                            "{buyer} passed {MAX_GATES} gates and never {gate}"
                        ));
                    }
                    let at = options.releases.iter().find_map(|c| match c {
                        Choice::Release { buyer: b, gate: g } if *b == buyer => Some(g.clone()),
                        _ => None,
                    });
                    let Some(at) = at else {
                        return astray(format!(
                            "{buyer} waits at no gate, the model has it at {gate}"
                        ));
                    };
                    let left = at == gate;
                    let release = Choice::Release {
                        buyer: buyer.clone(),
                        gate: at,
                    };
                    session.take(release).await?;
                    if left {
                        break;
                    }
                    options = match session.next().await? {
                        Some(options) => options,
                        None => {
                            return astray(format!("the run ended before {buyer} reached {gate}"));
                        }
                    };
                }
            }
        }
        self.played += 1;
        if self
            .plan
            .as_ref()
            .is_some_and(|p| p.as_ref().is_ok_and(|h| h.len() == self.played))
        {
            // The model stops where the property broke; live, the buyers
            // still waiting go on to their answers, in order, and the run
            // ends with the ledger's verdict.
            while let Some(options) = session.next().await? {
                let Some(release) = options.releases.first() else {
                    break;
                };
                session.take(release.clone()).await?;
            }
        }
        Ok(Ok(()))
    }

    async fn reply(&self, reply: &str, answer: Result<&StepView, String>) -> anyhow::Result<()> {
        let json = serde_json::to_string(&answer)?;
        let mut conn = self.store.conn().await?;
        let _: () = redis::pipe()
            .rpush(reply, json)
            .pexpire(reply, STEP_TIMEOUT.as_millis() as i64)
            .query_async(&mut conn)
            .await?;
        Ok(())
    }

    async fn pop(&self) -> anyhow::Result<Option<Envelope>> {
        let mut conn = self.store.conn().await?;
        let json: Option<String> = conn.lpop(key(&self.id, "commands"), None).await?;
        Ok(json.and_then(|json| serde_json::from_str(&json).ok()))
    }
}
