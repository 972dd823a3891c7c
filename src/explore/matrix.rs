//! `stocklock explore --all`: every cell of the matrix whose faults the
//! explorer can strike, explored on one stack: a safe cell must break in
//! none of its schedules; a cell where the checker has a counterexample is
//! explored until one breaks, and how many it took is reported.

use crate::check::order::OrderFaults;
use crate::check::{self, Property, protocol::Protocol};
use crate::variants::{Scenario, Variant};

use super::{Explored, Redises, Strategy, explore};
use crate::harness::stack::Stack;

/// Why the explorer cannot play a cell's faults (or judge what breaks
/// there), or `None` when it can.
pub fn unplayable(variant: Variant, scenario: Scenario) -> Option<&'static str> {
    let verdict = check::check(variant, scenario)?;
    match verdict.broken {
        None
        | Some(Property::Safety | Property::Stuck | Property::OneSale | Property::OrdersKept) => {
            None
        }
        Some(_) => Some("what breaks there is not judged by the explorer"),
    }
}

/// Why a cell of calls cut off by a paused Redis is not played on a stack
/// whose gates meet in the Redis the pause stops.
pub const CUT_OFF_NEEDS_GATES_APART: &str = "calls cut off by a paused Redis: the gates must meet in a Redis apart, which only a stack of the explorer's own has";

/// Why the faults of the database that keeps the stock are not explored.
pub const DATABASE_FAULTS_NOT_STRUCK: &str = "a crash of PostgreSQL under the buyers, or a commit's answer lost: the explorer does not strike them (`stocklock lab` plays them, `stocklock check` explores their model)";

/// Why a failover cell is not played on a stack the explorer did not
/// start.
pub const FAILOVER_NEEDS_OWN_STACKS: &str =
    "a failover cannot be undone: each schedule runs on a stack of the explorer's own";

/// Why a cell of the order pipeline's own faults is not played on a stack
/// the explorer did not start.
pub const ORDER_FAULTS_NEED_OWN_STACK: &str = "the order pipeline's own faults (a worker's death, PostgreSQL stopped, reservations, Redis losing its data): PostgreSQL is stopped, and a dead worker's messages claimed at once, only on a stack of the explorer's own";

/// One cell of the run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Cell {
    /// The checker's verdict (its word in the matrix).
    pub model: &'static str,
    /// Whether the checker has a counterexample (the explorer should find one).
    pub counterexample: bool,
    pub explored: Explored,
    /// The live result agrees with the model's: a violation found where
    /// the checker has one, none where it has none; and the history
    /// checker agreed with the ledger on every schedule.
    pub agrees: bool,
}

/// Every cell with a claim, the checker's verdict and faults the explorer
/// can strike: `safe` schedules of each safe cell, and up to `hunt` of a
/// cell with a counterexample. The cells it cannot play, and why.
pub async fn all(
    stack: &Stack,
    redises: &Redises,
    strategy: Strategy,
    (safe, hunt): (usize, usize),
    seed: u64,
) -> anyhow::Result<Matrix> {
    let (mut cells, mut skipped, mut errors) = (Vec::new(), Vec::new(), Vec::new());
    // The model's verdicts, computed while the first cells are explored.
    check::warm(check::cells());
    for variant in Variant::ALL {
        for scenario in Scenario::ALL {
            let Some(verdict) = check::check(variant, scenario) else {
                continue;
            };
            if let Some(why) = unplayable(variant, scenario) {
                skipped.push((variant, scenario, why));
                continue;
            }
            let bounds = check::bounds(scenario, Protocol::of(variant));
            if bounds.cutoffs > 0 && !redises.apart() {
                skipped.push((variant, scenario, CUT_OFF_NEEDS_GATES_APART));
                continue;
            }
            if bounds.database_faults() {
                skipped.push((variant, scenario, DATABASE_FAULTS_NOT_STRUCK));
                continue;
            }
            if bounds.failovers > 0 && !redises.apart() {
                skipped.push((variant, scenario, FAILOVER_NEEDS_OWN_STACKS));
                continue;
            }
            let order_faults = bounds.orders.is_some_and(|o| o != OrderFaults::default());
            if order_faults && redises.postgres.is_none() {
                skipped.push((variant, scenario, ORDER_FAULTS_NEED_OWN_STACK));
                continue;
            }
            let counterexample = verdict.broken.is_some();
            let schedules = if counterexample { hunt } else { safe };
            // A cell that could not be explored (a schedule stalled) is
            // reported, and the others are explored all the same.
            let explored =
                match explore(stack, redises, variant, scenario, strategy, schedules, seed).await {
                    Ok(explored) => explored,
                    Err(err) => {
                        eprintln!("{variant} in {scenario}: not explored: {err:#}");
                        errors.push(Errored {
                            variant: variant.name(),
                            scenario: scenario.name(),
                            error: format!("{err:#}"),
                        });
                        continue;
                    }
                };
            eprintln!(
                "{variant} in {scenario}: {} schedules, {}",
                explored.schedules,
                match &explored.found {
                    Some(found) => format!("broke: {}", found.ledger),
                    None => "nothing broke".to_owned(),
                }
            );
            cells.push(Cell {
                model: verdict.model,
                counterexample,
                agrees: counterexample == explored.found.is_some() && explored.disagreed.is_none(),
                explored,
            });
        }
    }
    Ok(Matrix {
        cells,
        skipped,
        errors,
    })
}

/// A cell whose exploration failed, and why.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Errored {
    pub variant: &'static str,
    pub scenario: &'static str,
    pub error: String,
}

/// The whole matrix explored: its cells, those not played and why, and
/// those whose exploration failed.
pub struct Matrix {
    pub cells: Vec<Cell>,
    pub skipped: Vec<(Variant, Scenario, &'static str)>,
    pub errors: Vec<Errored>,
}
