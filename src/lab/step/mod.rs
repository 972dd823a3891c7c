//! Step mode: the learner is the scheduler. A run of three buyers of one
//! cell on the live stack (chaos mode), each on a SKU of its own, driven
//! by the explorer's [`Session`]: the learner picks each step among those
//! the session offers (a buyer let go from its gate, one of the scenario's
//! faults), and after every step reads the stores' real state.
//!
//! A run lives in the instance that started it (its buyers' requests are
//! that process's), but any instance takes its steps: a step is a command
//! pushed on the run's list in Redis, which the run pops, takes, and
//! answers with the view after it (on a reply list of the command's own).
//! Every instance reads the run's last view from Redis. A run nobody
//! moves for [`IDLE`] ends by itself, letting its buyers go.
//!
//! Every fault it offers touches only the run's SKU and buyers (the lock
//! deleted, the lease run out, a buyer crashed or frozen, Redis's restart
//! as the SKU sees it): learners on one stack never disturb each other.
//! The cells whose faults would touch the whole stack (a paused Redis, a
//! failover, the order pipeline's faults) and Redlock's (whose nodes the
//! run does not see) are not offered.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

use super::explore::{Choice, Lane, Options, Redises, Session, Setup, matrix};
use super::stack::Stack;
use crate::check::{self, protocol::Protocol};
use crate::store::Store;
use crate::variants::{Scenario, Variant};
use crate::wire::StateSnapshot;

/// How long a run may wait for its next step before it ends itself.
pub const IDLE: Duration = Duration::from_secs(15 * 60);
/// How long a step may take before its caller stops waiting for the view.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(60);
/// The buyers' lease: the learner lets it run out (a button), it never
/// runs out by itself while someone thinks.
const LEASE_MS: u64 = crate::knobs::MAX_LEASE_MS;
/// How many buyers a run may have: the checker's three, or two.
pub const BUYERS: std::ops::RangeInclusive<u8> = 2..=3;
/// How often a waiting run looks for a command.
const POLL: Duration = Duration::from_millis(50);

/// Step mode's keys: the active runs (a sorted set of id by the time they
/// lapse), and each run's view, commands and replies.
const RUNS: &str = "{stocklock:step}:runs";
fn key(id: &str, what: &str) -> String {
    format!("{{stocklock:step}}:{id}:{what}")
}

/// Why step mode cannot play a cell on a live stack, or `None` when it can.
pub fn unplayable(variant: Variant, scenario: Scenario) -> Option<&'static str> {
    if !scenario.claim(variant).applies() {
        return Some("the variant makes no claim in this scenario");
    }
    let bounds = check::bounds(scenario, Protocol::of(variant));
    if bounds.cutoffs > 0 {
        return Some("a paused Redis would stop every learner's run, and the gates with it");
    }
    if bounds.failovers > 0 {
        return Some(matrix::FAILOVER_NEEDS_OWN_STACKS);
    }
    if bounds.orders.is_some() {
        return Some(
            "the order pipeline is scheduled for the whole stack: `stocklock explore` plays it on a stack of its own",
        );
    }
    if variant == Variant::Redlock {
        return Some(
            "Redlock's nodes are restarted and read by `stocklock explore` on a stack of its own",
        );
    }
    None
}

/// What the page shows of a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StepView {
    pub id: String,
    pub variant: String,
    pub scenario: String,
    pub sku: String,
    /// Counts the views published: a newer view has a larger one.
    pub version: u64,
    pub lanes: Vec<Lane>,
    /// What may happen now: the buyers' releases, then the faults.
    pub releases: Vec<Choice>,
    pub faults: Vec<Choice>,
    pub steps: Vec<Choice>,
    /// The SKU as the stores hold it now, and its lock's last fencing
    /// token.
    pub state: Option<StateSnapshot>,
    pub fence: Option<i64>,
    /// The run is over (every buyer answered or dead, or it was ended).
    pub over: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<StepVerdict>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The ledger's verdict on a run that is over, beside the checker's.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StepVerdict {
    pub violation: bool,
    pub ledger: String,
    /// The property the checker's shortest counterexample of the cell
    /// breaks, and its steps; `None` where the checker finds none.
    pub checker_breaks: Option<String>,
    pub checker_steps: Option<usize>,
}

/// A learner's step: one of the offered choices, or the end of the run.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    Take(Choice),
    End,
}

#[derive(Serialize, Deserialize)]
struct Envelope {
    reply: String,
    command: Command,
}

/// How many runs are active on the stack (their lapse time not passed).
pub async fn active(store: &Store) -> anyhow::Result<usize> {
    let mut conn = store.conn().await?;
    let now = now_ms();
    let _: i64 = conn.zrembyscore(RUNS, 0, now).await?;
    let count: usize = conn.zcard(RUNS).await?;
    Ok(count)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Starts a run of `variant` in `scenario` on `stack` (whose stock's Redis
/// is `redis_url`), driven by this process until it is over; its first
/// view, once every buyer waits at its first gate.
pub async fn start(
    store: Store,
    stack: Stack,
    redis_url: String,
    (variant, scenario): (Variant, Scenario),
    buyers: u8,
) -> anyhow::Result<StepView> {
    if let Some(why) = unplayable(variant, scenario) {
        bail!("{variant} in {scenario} is not played in step mode: {why}");
    }
    let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
    let mut conn = store.conn().await?;
    let _: i64 = conn
        .zadd(RUNS, &id, now_ms() + IDLE.as_millis() as i64)
        .await?;
    let (first, first_view) = tokio::sync::oneshot::channel();
    let run_id = id.clone();
    tokio::spawn(async move {
        let driver = Driver {
            store: store.clone(),
            id: run_id.clone(),
            variant,
            scenario,
            buyers,
            version: 0,
        };
        driver.drive(&stack, &redis_url, first).await;
        if let Ok(mut conn) = store.conn().await {
            let _: Result<i64, _> = conn.zrem(RUNS, &run_id).await;
        }
    });
    first_view
        .await
        .context("the run ended before its first view")?
}

/// The last view of run `id`, `None` when there is no such run (or it
/// ended long ago).
pub async fn view(store: &Store, id: &str) -> anyhow::Result<Option<StepView>> {
    let mut conn = store.conn().await?;
    let json: Option<String> = conn.get(key(id, "view")).await?;
    Ok(json.and_then(|json| serde_json::from_str(&json).ok()))
}

/// Sends `command` to run `id` and waits for the view after it.
pub async fn command(store: &Store, id: &str, command: Command) -> anyhow::Result<StepView> {
    let reply = key(id, &format!("reply:{}", uuid::Uuid::new_v4().simple()));
    let envelope = serde_json::to_string(&Envelope {
        reply: reply.clone(),
        command,
    })?;
    let mut conn = store.conn().await?;
    let commands = key(id, "commands");
    let _: () = redis::pipe()
        .rpush(&commands, envelope)
        .pexpire(&commands, IDLE.as_millis() as i64)
        .query_async(&mut conn)
        .await?;
    // A blocking pop on a connection of its own, without a response
    // timeout shorter than its own.
    let client = store.master_client().await?;
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    let mut waiting = client
        .get_multiplexed_async_connection_with_config(&config)
        .await?;
    let popped: Option<(String, String)> =
        waiting.blpop(&reply, STEP_TIMEOUT.as_secs_f64()).await?;
    let (_, json) = popped.context("the run did not answer the step in time")?;
    let answer: Result<StepView, String> = serde_json::from_str(&json)?;
    answer.map_err(anyhow::Error::msg)
}

/// The process's side of one run.
struct Driver {
    store: Store,
    id: String,
    variant: Variant,
    scenario: Scenario,
    buyers: u8,
    version: u64,
}

impl Driver {
    async fn drive(
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
                let view = self.view(&session, &options).await;
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
                        owed = reply;
                    }
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
            session.lanes(),
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
                view.verdict = Some(StepVerdict {
                    violation: schedule.violation,
                    ledger: schedule.ledger,
                    checker_breaks: model
                        .as_ref()
                        .and_then(|m| m.broken.map(|p| p.name().to_owned())),
                    checker_steps: model.filter(|m| m.broken.is_some()).map(|m| m.trace.len()),
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
            verdict: None,
            error: None,
        }
    }

    async fn view(&self, session: &Session<'_>, options: &Options) -> StepView {
        StepView {
            lanes: session.lanes(),
            releases: options.releases.clone(),
            faults: options.faults.clone(),
            steps: session.steps().to_vec(),
            state: session.state().await.ok(),
            fence: session.fence().await,
            ..self.blank(session.sku())
        }
    }

    /// Publishes `view` as the run's last, numbered after the one before.
    async fn publish(&mut self, mut view: StepView) -> anyhow::Result<StepView> {
        self.version += 1;
        view.version = self.version;
        let mut conn = self.store.conn().await?;
        let json = serde_json::to_string(&view)?;
        let lapse = now_ms() + IDLE.as_millis() as i64;
        let _: () = redis::pipe()
            .set_ex(key(&self.id, "view"), json, 2 * IDLE.as_secs())
            .zadd(RUNS, &self.id, lapse)
            .query_async(&mut conn)
            .await?;
        Ok(view)
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
