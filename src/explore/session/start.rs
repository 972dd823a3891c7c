//! A session begun: the SKU stocked, the run's buyers, stores and
//! faults set up as the model's bounds ask, and the buyers sent, one at a
//! time in the seed's order, to their first gates.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use anyhow::bail;

use super::{Session, Setup};
use crate::check;
use crate::check::protocol::{Program, Protocol};
use crate::explore::run::{Run, elsewhere, failover, name, nodes, pipeline};
use crate::explore::strike::Budget;
use crate::explore::{BUYERS, EARLY_LEASE_MS, Redises, STOCK, matrix};
use crate::gate::Scheduler;
use crate::harness::stack::Stack;
use crate::history::Recorder;
use crate::knobs::Sku;
use crate::store::{Keys, Store};
use crate::variants::{Scenario, Variant};

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
        // A database lock's frozen holder: the database ends its session
        // once idle for the lease, which the explorer waits out.
        let transaction = Protocol::of(variant).program == Program::Transaction;
        let short = ((bounds.vanish_early
            || bounds.pauses > 0
            || bounds.late_renewals > 0
            || bounds.slow_votes > 0)
            && watchdog)
            || (bounds.pauses > 0 && transaction);
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
            database: crate::explore::run::waits::DatabaseWaits::new(
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
}
