//! One schedule as a session of steps: its buyers sent, then, step by
//! step, what may happen now ([`Session::next`]) and the step someone
//! chose ([`Session::take`]), then the ledger's verdict
//! ([`Session::finish`]). The explorer chooses by its strategy; step mode
//! lets a learner choose.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use anyhow::{Context, bail};

use super::run::{Buyer, Run, elsewhere, failover, name, nodes, pipeline};
use super::strike::Budget;
use super::{BUYERS, Choice, EARLY_LEASE_MS, LEASE_MS, Redises, STALL, STOCK, matrix};
use crate::check::{self, model::Bounds, protocol::Protocol};
use crate::client::StackClient;
use crate::gate::Scheduler;
use crate::history::Recorder;

mod after;
mod finish;
use crate::harness::stack::Stack;
use crate::knobs::Sku;
use crate::store::{Keys, Store};
use crate::variants::{Scenario, Variant};

/// Where a session runs: its run's name (its gates' and its request ids'),
/// its SKU, and its buyers' lease where no fault needs a short one.
#[derive(Clone, Debug)]
pub struct Setup {
    pub run_id: String,
    pub sku: String,
    pub lease_ms: u64,
    /// How many buyers (A, B, ...): the checker's three, or fewer.
    pub buyers: u8,
}

impl Setup {
    /// The explorer's: seed `seed` of the cell (its run named by both, so
    /// that `--all`'s histories name each cell's SKUs apart).
    pub fn explore(variant: Variant, scenario: Scenario, seed: u64) -> Setup {
        Setup {
            run_id: format!("explore-{variant}-{scenario}-{seed}"),
            sku: format!("x-{variant}"),
            lease_ms: LEASE_MS,
            buyers: BUYERS,
        }
    }
}

/// What may happen now: the buyers' steps (a gate's release, a retry) and
/// the rest (the scenario's faults, the order pipeline's steps).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub releases: Vec<Choice>,
    pub faults: Vec<Choice>,
}

impl Options {
    /// Whether `choice` is offered.
    pub fn offers(&self, choice: &Choice) -> bool {
        self.releases.contains(choice) || self.faults.contains(choice)
    }
}

/// One schedule under way.
pub struct Session<'a> {
    pub(super) run: Run<'a>,
    variant: Variant,
    bounds: Bounds,
    budget: Budget,
    pub(super) setup: Setup,
    /// The instance whose clock runs ahead, and how far per lease tick.
    skewed: Option<StackClient>,
    lease_ms: u64,
    pub(super) steps: Vec<Choice>,
    progress: Instant,
    /// A stall names the schedule by its seed (0 outside the explorer).
    seed: u64,
    /// What its buyers were told, for the history checker.
    recorder: Recorder,
    /// The cell's claim admits under-selling (a buyer told "sold out"
    /// while stock remained is what it expects).
    undersells: bool,
    /// The cell's claim, judged once the schedule is over.
    claim: crate::variants::Behaviour,
    /// `busy`: the buyers' answers judged as a node came back, ending the
    /// fault (`None` until then).
    refused: Option<Option<String>>,
}

impl<'a> Session<'a> {
    /// Stocks the SKU and sends the buyers of `variant` in `scenario` to
    /// their first gates.
    pub async fn start(
        stack: &'a Stack,
        redises: &Redises,
        (variant, scenario): (Variant, Scenario),
        setup: Setup,
        seed: u64,
    ) -> anyhow::Result<Session<'a>> {
        let sku = setup.sku.clone();
        let recorder = Recorder::prefixed(&format!("{}/", setup.run_id));
        let recording = stack.client.recording(recorder.clone());
        recording.reset(&sku, STOCK, 0).await?;
        let bounds = check::bounds(scenario, Protocol::of(variant));
        // etcd's and ZooKeeper's leases: their keep-alives pass no gate, and
        // the explorer ends a lease in the store (see `elsewhere`).
        let keys = Keys::new(&Sku::parse(&sku)?);
        let elsewhere = elsewhere::Elsewhere::of(stack, variant, &keys).await?;
        let watchdog = Protocol::of(variant).watchdog() && elsewhere.is_none();
        // An early deletion, or a frozen holder's lock, is noticed by the
        // holder's next renewal: with a short lease it comes soon (renewals go
        // on at once; see `settle`).
        let early = bounds.vanish_early && watchdog;
        // (A slow Redlock node: the round's validity is that lease minus the
        // ticks its votes took.)
        let short = (bounds.vanish_early
            || bounds.pauses > 0
            || bounds.late_renewals > 0
            || bounds.slow_votes > 0)
            && watchdog;
        let lease_ms = if short {
            EARLY_LEASE_MS
        } else {
            setup.lease_ms
        };
        if variant == Variant::Redlock {
            // The model's nodes are the stack's, those down from the start down.
            let nodes = usize::from(bounds.nodes);
            if stack.redlock_nodes.len() != nodes {
                bail!(
                    "the model asks {nodes} Redlock nodes and the stack has {}",
                    stack.redlock_nodes.len()
                );
            }
            nodes::set(stack, usize::from(bounds.nodes_down)).await?;
        }
        let count = setup.buyers.clamp(1, BUYERS);
        // The stock's PostgreSQL: the explorer's own, or the one `up` started.
        let postgres_url = match &redises.postgres {
            Some(postgres) => Some(postgres.lock().await.url()),
            None => stack.postgres.as_ref().map(|p| p.url.clone()),
        };
        let mut run = Run {
            stack,
            count,
            scheduler: Scheduler::start(&redises.gates, &setup.run_id).await?,
            buyers: HashMap::new(),
            keys,
            store: Store::open(&redises.stock)?,
            renewed: HashSet::new(),
            blocked: HashSet::new(),
            holders: HashSet::new(),
            frozen: HashSet::new(),
            held_renewals: Vec::new(),
            votes: Vec::new(),
            rounds: HashMap::new(),
            nodes: nodes::nodes_of(stack, variant)?,
            elsewhere,
            entries: HashMap::new(),
            requests: HashMap::new(),
            stock_url: redises.stock.clone(),
            // (Asked only where the buyers' stock is in it: the other
            // variants never wait inside PostgreSQL.)
            database: super::run::waits::DatabaseWaits::new(
                postgres_url.clone().filter(|_| variant.stock_in_postgres()),
            ),
            postgres_url,
            pipeline: None,
            failing: None,
            claim_ran_out: false,
            asked_again: HashSet::new(),
            asks: HashMap::new(),
        };
        if bounds.failovers > 0 {
            let failing = failover::Failing::of(stack, variant, &redises.stock, &bounds)?;
            run.failing = Some(failing);
        }
        // The order pipeline is scheduled, and judged, where the model has it.
        if let (true, Some(faults)) = (variant.orders(), bounds.orders) {
            let servers = (redises.gates.as_str(), redises.postgres.clone());
            let run_sku = (setup.run_id.as_str(), sku.as_str());
            let pipeline = pipeline::Pipeline::new(&run, run_sku, faults, servers)?;
            run.pipeline = Some(pipeline);
            run.start_pipeline().await?;
        }
        if bounds.cutoffs > 0 && !redises.apart() {
            bail!("{}", matrix::CUT_OFF_NEEDS_GATES_APART);
        }
        if bounds.database_faults() {
            bail!("{}", matrix::DATABASE_FAULTS_NOT_STRUCK);
        }
        let tick = std::time::Duration::from_millis(lease_ms / u64::from(bounds.lease.max(1)));
        let mut session = Session {
            run,
            variant,
            budget: Budget::of(variant, scenario, early, tick),
            bounds,
            setup,
            skewed: None,
            lease_ms,
            steps: Vec::new(),
            progress: Instant::now(),
            seed,
            recorder,
            undersells: scenario.claim(variant).behaviour == crate::variants::Behaviour::LosesUnits,
            claim: scenario.claim(variant).behaviour,
            refused: None,
        };
        // A skewed clock: the last buyer's instance runs ahead by the model's
        // skew, counted in the buyers' lease's ticks (chaos mode's
        // `clock_skew`, which only `setnx-expiry` believes), set back once the
        // schedule is over.
        if session.bounds.skew > 0 {
            let at = usize::from(count - 1) % stack.instances.len();
            let client = stack.client.at(&stack.instances[at].url);
            client.chaos(&session.skew(session.bounds.skew)).await?;
            session.skewed = Some(client);
        }
        for n in 0..count {
            let at = match session.bounds.one_process {
                true => 0,
                false => usize::from(n) % stack.instances.len(),
            };
            let client = recording.at(&stack.instances[at].url);
            // (`failover-wait`: each buyer `WAIT`s for a replica to have its lock.)
            let path = format!(
                "/deductStock/{variant}?sku={sku}&work_ms=0&lease_ms={lease_ms}&schedule={}:{}{}{}",
                session.setup.run_id,
                name(n),
                session
                    .request_id(n)
                    .map_or(String::new(), |id| format!("&request_id={id}")),
                if session.bounds.wait_replicas {
                    "&replicas=1"
                } else {
                    ""
                }
            );
            session.run.requests.insert(n, (client, path));
        }
        // One at a time, each until it waits at its first gate (or has its
        // answer): what a buyer does before its first gate (claim its
        // request id, queue for etcd's or ZooKeeper's lock) is then done in
        // an order the seed chooses, never in the order their requests
        // happen to reach Redis.
        for i in 0..count {
            let n = u8::try_from((seed + u64::from(i)) % u64::from(count))?;
            session.run.send(n).await?;
            session.run.settle().await?;
        }
        Ok(session)
    }

    /// Retries of one purchase: every buyer sends the same request id.
    /// Where calls are cut off, each buyer has its own (it asks again); so
    /// does each buyer of an order variant (its order is found by it).
    fn request_id(&self, n: u8) -> Option<String> {
        let own = self.bounds.cutoffs > 0 || self.variant.orders();
        match (self.bounds.one_request, own) {
            (true, _) => Some(self.setup.run_id.clone()),
            (false, true) => Some(format!("{}-{}", self.setup.run_id, name(n))),
            (false, false) => None,
        }
    }

    fn skew(&self, ticks: u8) -> crate::wire::ChaosAction {
        crate::wire::ChaosAction::ClockSkew {
            ms: i64::from(ticks) * self.lease_ms as i64 / i64::from(self.bounds.lease.max(1)),
        }
    }

    /// The steps taken so far.
    pub fn steps(&self) -> &[Choice] {
        &self.steps
    }

    /// Waits until every buyer waits at a gate, has answered, or waits for
    /// a lock, then says what may happen now; `None` once the schedule is
    /// over (every buyer answered or dead, the pipeline at rest).
    pub async fn next(&mut self) -> anyhow::Result<Option<Options>> {
        loop {
            // (A stall names its schedule, to be played again by its seed.)
            let (seed, steps) = (self.seed, &self.steps);
            let settled = self.run.settle().await;
            settled.with_context(|| format!("seed {seed}; steps {steps:?}"))?;
            let run = &mut self.run;
            let waiting: Vec<u8> = (0..run.count)
                .filter(|n| matches!(run.buyers.get(n), Some(Buyer::Waiting(..))))
                .collect();
            let lock = run.lock().await?;
            // Each buyer's gate, each Redlock vote held, and each buyer
            // told `unknown` asking again.
            let mut releases = run.releases();
            releases.extend(run.retries());
            releases.extend(run.asking_again());
            let down = match self.bounds.restarts > 0 {
                true => run.nodes_down().await?,
                false => Vec::new(),
            };
            let mut faults = run.offered(&waiting, (lock, &down), &self.budget, self.variant);
            if self.budget.claim_expiries > 0 && run.claim_may_run_out(&waiting).await? {
                faults.push(Choice::ClaimRunsOut);
            }
            // The order pipeline's steps (chosen as faults are) and faults.
            let (flow, more) = run.pipeline_steps().await?;
            faults.extend(flow.iter().cloned().chain(more));
            let pending = run.buyers.values().any(|b| matches!(b, Buyer::Sent(_)));
            if releases.is_empty() && flow.is_empty() && !pending {
                return Ok(None);
            }
            if releases.is_empty() && faults.is_empty() {
                if self.progress.elapsed() > STALL {
                    bail!(
                        "no buyer reached a gate or answered within {STALL:?} (seed {}; {}; steps {:?})",
                        self.seed,
                        run.whereabouts(),
                        self.steps
                    );
                }
                continue;
            }
            return Ok(Some(Options { releases, faults }));
        }
    }

    /// Takes `choice`, one of those [`Session::next`] offered.
    pub async fn take(&mut self, choice: Choice) -> anyhow::Result<()> {
        // `busy`: a node coming back may end the fault; what the buyers
        // were told until then is judged now.
        if let Choice::NodeRestart { .. } = choice
            && self.claim == crate::variants::Behaviour::Busy
            && self.refused.is_none()
        {
            self.refused = Some(self.refusals());
        }
        let run = &mut self.run;
        match &choice {
            Choice::Release { buyer, gate } => {
                let n = super::index(buyer);
                if run.frozen.contains(&n) {
                    // (etcd's and ZooKeeper's renewals pass no gate.)
                    let renews = self.budget.watchdog && run.elsewhere.is_none();
                    run.wake_up(n, renews).await?;
                }
                match run.held_vote(n, gate) {
                    Some(vote) => run.release_vote(vote).await?,
                    None => run.release(n).await?,
                }
            }
            Choice::Retry { buyer } => {
                let n = super::index(buyer);
                if run.claim_ran_out {
                    run.asked_again.insert(n);
                }
                run.send(n).await?
            }
            // Redis back empty (restarted, or its data lost), the SKU
            // stocked again: for the history, the units sold so far come
            // back (one stock across the restart: a buyer in flight may
            // sell in either epoch).
            Choice::Restart | Choice::DataLoss => {
                let sku = self.setup.sku.clone();
                let call = self.recorder.now();
                let left = run.stack.client.state(&sku).await?.remaining;
                run.strike(&choice, &mut self.budget, self.variant, &sku)
                    .await?;
                for unit in left.max(0) + 1..=STOCK {
                    self.recorder.returned(&sku, call, unit);
                }
            }
            fault => {
                // Dead: whatever it is told once let go at the end is told
                // to nobody.
                if let Choice::Crash { buyer } = fault {
                    (self.recorder).silence(&format!("schedule={}:{buyer}", self.setup.run_id));
                }
                let sku = self.setup.sku.clone();
                run.strike(fault, &mut self.budget, self.variant, &sku)
                    .await?
            }
        }
        self.steps.push(choice);
        self.progress = Instant::now();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `explore --all` writes every cell's histories into one file: each
    /// cell's schedules must name their SKUs apart (one variant, one seed,
    /// two scenarios once declared one SKU twice).
    #[test]
    fn every_cell_and_seed_names_its_run_apart() {
        let mut seen = HashSet::new();
        for variant in Variant::ALL {
            for scenario in Scenario::ALL {
                for seed in 1..=3 {
                    let run = Setup::explore(variant, scenario, seed).run_id;
                    assert!(seen.insert(run.clone()), "{run} named twice");
                }
            }
        }
    }
}
