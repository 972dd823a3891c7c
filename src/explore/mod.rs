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

use std::time::Duration;

use anyhow::Context;
use clap::ValueEnum;

use crate::check::{self, protocol::Protocol};
use crate::variants::{Scenario, Variant};

use crate::harness::stack::Stack;

mod choice;
mod claim;
mod cli;
mod cutoff;
mod lanes;
mod many;
pub mod matrix;
mod run;
mod second;
mod session;
mod strike;

pub use choice::Choice;
pub use cli::{ExploreArgs, run};
pub use cutoff::Redises;
pub use lanes::Lane;
pub use many::{Explored, explore};
pub use run::pipeline::Postgres;
pub use session::{Options, Session, Setup};

/// Buyers in each schedule, and units in stock (the checker's bounds).
const BUYERS: u8 = 3;
const STOCK: i64 = 2;
/// The buyers' lease: long enough that no lease runs out by itself while
/// a schedule runs; the explorer makes one run out when it chooses to.
const LEASE_MS: u64 = 20_000;
/// The lease where an early deletion must meet a renewal: a watchdog
/// renews every third of it.
const EARLY_LEASE_MS: u64 = 1_500;
/// How long a schedule may wait for anything at all (a buyer on its way
/// to its next gate, an order worker to its turn).
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
    /// The same, in Chinese.
    pub ledger_zh: String,
    pub violation: bool,
    /// The history checker's verdict of what the schedule's buyers were told.
    pub history: String,
    pub history_zh: String,
    /// Set when it and the ledger's verdict disagree on safety.
    pub disagreement: Option<String>,
    pub disagreement_zh: Option<String>,
    /// The history itself, JSON Lines (`stocklock history check`'s
    /// format), its SKU named by the schedule's run.
    #[serde(skip)]
    pub recorded: String,
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
    let setup = Setup::explore(variant, scenario, seed);
    let mut session = Session::start(stack, redises, (variant, scenario), setup, seed).await?;
    let mut rng = fastrand::Rng::with_seed(seed);
    // PCT: a priority per buyer, and the steps where the one going on drops.
    let mut priority: Vec<u64> = (0..BUYERS).map(|_| rng.u64(..)).collect();
    let changes: Vec<usize> = (0..2).map(|_| rng.usize(1..24)).collect();
    // PCT strikes a fault at one step in eight; a failover's two (held
    // back, then the master dies) at one in three, since each of its
    // schedules costs a stack of its own.
    let fails_over = check::bounds(scenario, Protocol::of(variant)).failovers > 0;
    let odds = if fails_over { 3 } else { 8 };
    let outcome = async {
        while let Some(Options { releases, faults }) = session.next().await? {
            let choice = match strategy {
                Strategy::Random => {
                    let all: Vec<&Choice> = releases.iter().chain(&faults).collect();
                    all[rng.usize(..all.len())].clone()
                }
                Strategy::Pct
                    if !faults.is_empty() && (releases.is_empty() || rng.u8(..odds) == 0) =>
                {
                    faults[rng.usize(..faults.len())].clone()
                }
                Strategy::Pct => {
                    let n = releases
                        .iter()
                        .map(|c| match c {
                            Choice::Release { buyer, .. } | Choice::Retry { buyer } => index(buyer),
                            _ => 0,
                        })
                        .max_by_key(|&n| priority[usize::from(n)])
                        .context("a waiting buyer")?;
                    if changes.contains(&session.steps().len()) {
                        priority[usize::from(n)] = 0;
                    }
                    // Its first: its gate, or its first vote held.
                    releases
                        .iter()
                        .find(|c| matches!(c, Choice::Release { buyer, .. } | Choice::Retry { buyer } if index(buyer) == n))
                        .context("the buyer's release")?
                        .clone()
                }
            };
            session.take(choice).await?;
        }
        anyhow::Ok(())
    }
    .await;
    session.finish(outcome).await
}
