//! `stocklock explore`: schedules of the real code chosen at random, on a
//! live stack. Three buyers (A, B, C) on three instances stop at every
//! gate; at each step the explorer lets one go, or strikes one of the
//! scenario's faults, or lets a lease run out; after each schedule it
//! reads the ledger. Two strategies choose the step:
//!
//! - `random`: any step that can happen now, each as likely;
//! - `pct` (probabilistic concurrency testing): the buyers get random
//!   priorities and the waiting buyer with the highest goes on; at `depth`
//!   random steps the one going on drops below all others. A bug that
//!   needs `depth` ordering constraints is found with a probability that
//!   does not shrink with the length of the schedule. Faults strike at
//!   random steps.
//!
//! A schedule is named by its seed: before each choice the explorer waits
//! for every buyer to reach a gate, answer, or wait for a lock, so the
//! same seed meets the same choices and makes them again.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::ValueEnum;

use crate::check::{self, protocol::Protocol};
use crate::gate::Scheduler;
use crate::knobs::Sku;
use crate::store::{Keys, Store};
use crate::variants::{Scenario, Variant};

use super::stack::Stack;

mod choice;
mod cli;
mod cutoff;
mod elsewhere;
mod failover;
mod many;
pub mod matrix;
mod nodes;
mod pipeline;
mod run;
mod strike;

use run::{Buyer, Run, name};
use strike::Budget;

pub use choice::Choice;
pub use cli::{ExploreArgs, run};
pub use cutoff::Redises;
pub use many::{Explored, explore};
pub use pipeline::Postgres;

/// Buyers in each schedule, and units in stock (the checker's bounds).
const BUYERS: u8 = 3;
const STOCK: i64 = 2;
/// How long a released buyer may take to reach its next gate, unless it
/// waits for a lock (then it comes when the lock is free).
const SETTLE: Duration = Duration::from_millis(200);
/// The buyers' lease: long enough that no lease runs out by itself while
/// a schedule runs; the explorer makes one run out when it chooses to.
const LEASE_MS: u64 = 20_000;
/// The lease where an early deletion must meet a renewal: a watchdog
/// renews every third of it.
const EARLY_LEASE_MS: u64 = 1_500;
/// How long a schedule may wait for anything at all.
const STALL: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
pub enum Strategy {
    Random,
    Pct,
}

/// One schedule explored.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Schedule {
    pub seed: u64,
    pub steps: Vec<Choice>,
    /// What the ledger showed, and whether it broke a property.
    pub ledger: String,
    pub violation: bool,
}

/// The index of a buyer the explorer named.
fn index(buyer: &str) -> u8 {
    buyer.bytes().next().map_or(0, |b| b.saturating_sub(b'A'))
}

/// The gates a buyer waits at while it works (between its read and its
/// check that it still holds its lock): where an early deletion strikes.
const WORKING: [&str; 2] = ["after_read", "before_check"];

/// Explores one schedule of `variant` in `scenario` with `seed`.
pub async fn one(
    stack: &Stack,
    redises: &Redises,
    variant: Variant,
    scenario: Scenario,
    strategy: Strategy,
    seed: u64,
) -> anyhow::Result<Schedule> {
    let sku = format!("x-{variant}");
    stack.client.reset(&sku, STOCK, 0).await?;
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
    let lease_ms = if short { EARLY_LEASE_MS } else { LEASE_MS };
    let run_id = format!("explore-{variant}-{seed}");
    let mut rng = fastrand::Rng::with_seed(seed);
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
    let mut run = Run {
        stack,
        scheduler: Scheduler::start(&redises.gates, &run_id).await?,
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
        nodes: run::nodes_of(stack, variant)?,
        elsewhere,
        entries: HashMap::new(),
        requests: HashMap::new(),
        stock_url: redises.stock.clone(),
        pipeline: None,
        failing: None,
    };
    if bounds.failovers > 0 {
        let failing = failover::Failing::of(stack, variant, &redises.stock, &bounds)?;
        run.failing = Some(failing);
    }
    // The order pipeline is scheduled, and judged, where the model has it.
    if let (true, Some(faults)) = (variant.orders(), bounds.orders) {
        let servers = (redises.gates.as_str(), redises.postgres.clone());
        let pipeline = pipeline::Pipeline::new(&run, (&run_id, &sku), faults, servers)?;
        run.pipeline = Some(pipeline);
        run.start_pipeline().await?;
    }
    let one_process = bounds.one_process;
    // Retries of one purchase: every buyer sends the same request id.
    // Where calls are cut off, each buyer has its own (it asks again); so
    // does each buyer of an order variant (its order is found by it).
    let own = bounds.cutoffs > 0 || variant.orders();
    let request_id = |n: u8| match (bounds.one_request, own) {
        (true, _) => Some(run_id.clone()),
        (false, true) => Some(format!("{run_id}-{}", name(n))),
        (false, false) => None,
    };
    let id = |n: u8| request_id(n).map_or(String::new(), |id| format!("&request_id={id}"));
    if bounds.cutoffs > 0 && !redises.apart() {
        bail!("{}", matrix::CUT_OFF_NEEDS_GATES_APART);
    }
    // A skewed clock: the last buyer's instance runs ahead by the model's
    // skew, counted in the buyers' lease's ticks (chaos mode's
    // `clock_skew`, which only `setnx-expiry` believes), set back once the
    // schedule is over.
    let skewed = (bounds.skew > 0).then(|| {
        let at = usize::from(BUYERS - 1) % stack.instances.len();
        stack.client.at(&stack.instances[at].url)
    });
    let skew = |ticks: u8| crate::wire::ChaosAction::ClockSkew {
        ms: i64::from(ticks) * lease_ms as i64 / i64::from(bounds.lease.max(1)),
    };
    if let Some(client) = &skewed {
        client.chaos(&skew(bounds.skew)).await?;
    }
    for n in 0..BUYERS {
        let at = match one_process {
            true => 0,
            false => usize::from(n) % run.stack.instances.len(),
        };
        let instance = &run.stack.instances[at];
        let client = run.stack.client.at(&instance.url);
        // (`failover-wait`: each buyer `WAIT`s for a replica to have its lock.)
        let path = format!(
            "/deductStock/{variant}?sku={sku}&work_ms=0&lease_ms={lease_ms}&schedule={run_id}:{}{}{}",
            name(n),
            id(n),
            if bounds.wait_replicas {
                "&replicas=1"
            } else {
                ""
            }
        );
        run.requests.insert(n, (client, path));
        run.send(n).await?;
    }
    let tick = Duration::from_millis(lease_ms / u64::from(bounds.lease.max(1)));
    let mut budget = Budget::of(variant, scenario, early, tick);
    // PCT: a priority per buyer, and the steps where the one going on drops.
    let mut priority: Vec<u64> = (0..BUYERS).map(|_| rng.u64(..)).collect();
    let changes: Vec<usize> = (0..2).map(|_| rng.usize(1..24)).collect();
    let mut steps = Vec::new();
    // PCT strikes a fault at one step in eight; a failover's two (held
    // back, then the master dies) at one in three, since each of its
    // schedules costs a stack of its own.
    let odds = if bounds.failovers > 0 { 3 } else { 8 };
    let outcome = async {
        let mut progress = Instant::now();
        loop {
            // (A stall names its schedule, to be played again by its seed.)
            run.settle()
                .await
                .with_context(|| format!("seed {seed}; steps {steps:?}"))?;
            let waiting: Vec<u8> = (0..BUYERS)
                .filter(|n| matches!(run.buyers.get(n), Some(Buyer::Waiting(..))))
                .collect();
            let lock = run.lock().await?;
            // Each buyer's gate, each Redlock vote held, and each buyer
            // told `unknown` asking again.
            let mut choices = run.releases();
            choices.extend(run.retries());
            let down = match bounds.restarts > 0 {
                true => run.nodes_down().await?,
                false => Vec::new(),
            };
            let mut faults_now = run.offered(&waiting, (lock, &down), &budget, variant);
            // The order pipeline's steps (chosen as faults are) and faults.
            let (flow, more) = run.pipeline_steps().await?;
            faults_now.extend(flow.iter().cloned().chain(more));
            let pending = run.buyers.values().any(|b| matches!(b, Buyer::Sent(_)));
            if choices.is_empty() && flow.is_empty() && !pending {
                break;
            }
            if choices.is_empty() && faults_now.is_empty() {
                if progress.elapsed() > STALL {
                    bail!(
                        "no buyer reached a gate or answered within {STALL:?} (seed {seed}; {}; steps {steps:?})",
                        run.whereabouts()
                    );
                }
                continue;
            }
            let choice = match strategy {
                Strategy::Random => {
                    let all: Vec<Choice> = choices.iter().chain(&faults_now).cloned().collect();
                    all[rng.usize(..all.len())].clone()
                }
                Strategy::Pct
                    if !faults_now.is_empty() && (choices.is_empty() || rng.u8(..odds) == 0) =>
                {
                    faults_now[rng.usize(..faults_now.len())].clone()
                }
                Strategy::Pct => {
                    let n = choices
                        .iter()
                        .map(|c| match c {
                            Choice::Release { buyer, .. } | Choice::Retry { buyer } => index(buyer),
                            _ => 0,
                        })
                        .max_by_key(|&n| priority[usize::from(n)])
                        .context("a waiting buyer")?;
                    if changes.contains(&steps.len()) {
                        priority[usize::from(n)] = 0;
                    }
                    // Its first: its gate, or its first vote held.
                    choices
                        .iter()
                        .find(|c| matches!(c, Choice::Release { buyer, .. } | Choice::Retry { buyer } if index(buyer) == n))
                        .context("the buyer's release")?
                        .clone()
                }
            };
            match &choice {
                Choice::Release { buyer, gate } => {
                    let n = index(buyer);
                    if run.frozen.contains(&n) {
                        // (etcd's and ZooKeeper's renewals pass no gate.)
                        let renews = budget.watchdog && run.elsewhere.is_none();
                        run.wake_up(n, renews).await?;
                    }
                    match run.held_vote(n, gate) {
                        Some(vote) => run.release_vote(vote).await?,
                        None => run.release(n).await?,
                    }
                }
                Choice::Retry { buyer } => run.send(index(buyer)).await?,
                fault => run.strike(fault, &mut budget, variant, &sku).await?,
            }
            steps.push(choice);
            progress = Instant::now();
        }
        anyhow::Ok(())
    }
    .await;
    let unskewed = match &skewed {
        Some(client) => client.chaos(&skew(0)).await.map(|_| ()),
        None => Ok(()),
    };
    let state = stack.client.state(&sku).await;
    // The order pipeline, once it settled (a crashed buyer, a dead worker
    // still held, as good as dead): its books must match.
    let books = run.settle_pipeline().await;
    // A lock with no TTL and a dead holder: nobody will ever sell again.
    let ttl = run.lock().await;
    let crashed = run.buyers.values().any(|b| matches!(b, Buyer::Crashed(..)));
    // Nobody stays held, the crashed included.
    run.scheduler.abandon().await?;
    unskewed?;
    let (mut sales, mut answered_sold) = (0, 0);
    let (mut answers, mut answered) = (Vec::new(), Vec::new());
    let mut buyers: Vec<(u8, Buyer)> = run.buyers.drain().collect();
    buyers.sort_by_key(|(n, _)| *n);
    if buyers.len() != usize::from(BUYERS) && outcome.is_ok() {
        bail!(
            "the explorer lost track of a buyer: {} of {BUYERS} left",
            buyers.len()
        );
    }
    for (n, buyer) in buyers {
        let answer = match buyer {
            Buyer::Sent(request) | Buyer::Waiting(_, request) | Buyer::Crashed(request) => {
                request.await.ok()
            }
            Buyer::Done(answer) => Some(answer),
        };
        sales += answer.as_ref().is_some_and(|a| a.sold() && !a.replayed()) as usize;
        answered_sold += answer.as_ref().is_some_and(|a| a.sold()) as usize;
        answers.push(format!(
            "{} {}",
            name(n),
            answer.as_ref().map_or("no answer".to_owned(), |a| format!(
                "{} {}",
                a.status,
                a.reason().unwrap_or_default()
            ))
        ));
        answered.extend(answer.map(|a| (n, a)));
    }
    outcome?;
    let state = state?;
    let books = books?;
    // Every buyer told `sold` finds its order (a sale whose message Redis
    // lost has none, in whatever epoch).
    let missing = match run.pipeline.is_some() {
        true => pipeline::without_order(&run, &sku, &answered, request_id).await?,
        false => Vec::new(),
    };
    let unordered = books.as_ref().is_some_and(|b| !b.matches()) || !missing.is_empty();
    // A failover loses the old master's records of its sales: a unit sold
    // twice shows in the answers.
    let twice_told = match bounds.failovers > 0 {
        true => crate::lab::replay::sold_twice(answered.iter().map(|(n, a)| (n, a))),
        false => Vec::new(),
    };
    // (`setnx-expiry`'s key has no TTL either, but its value's time runs out.)
    let stuck =
        crashed && ttl? == Some(-1) && variant != Variant::SetnxExpiry && state.remaining > 0;
    // One purchase retried: it may sell once (its retries replay it).
    let twice = bounds.one_request && sales > 1;
    // Calls cut off: once every buyer told `unknown` asked again, each sale
    // in the ledger is a buyer's answered `sold` (an id sold twice, or a
    // sale no answer owns, breaks it).
    let unowned = bounds.cutoffs > 0 && state.sold != answered_sold as i64;
    Ok(Schedule {
        seed,
        steps,
        ledger: format!(
            "oversold {}, duplicates {}, sold {} of {}{}{}{}{}{}",
            state.oversold,
            state.duplicates,
            state.sold,
            state.initial,
            match stuck {
                true => "; stuck: a lock with no TTL, its holder dead, units left",
                false => "",
            },
            match twice {
                true => format!("; one request id sold {sales} times"),
                false => String::new(),
            },
            match unowned {
                true => format!(
                    "; {answered_sold} buyers answered sold: {}",
                    answers.join(", ")
                ),
                false => String::new(),
            },
            match twice_told.is_empty() {
                true => String::new(),
                false => format!("; units answered sold twice: {}", twice_told.join(", ")),
            },
            match &books {
                Some(b) => format!(
                    "; orders: {}; buyers sold with no order: {missing:?}",
                    b.verdict()
                ),
                None => String::new(),
            }
        ),
        violation: state.oversold > 0
            || state.duplicates > 0
            || stuck
            || twice
            || unowned
            || unordered
            || !twice_told.is_empty(),
    })
}
