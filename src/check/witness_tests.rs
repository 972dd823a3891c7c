//! Tests that a verdict with no counterexample rests on a witness that
//! goes through its scenario's fault (issue 57, finding 6): a plain sale
//! with no fault in it shows nothing about the fault the cell is about.

use super::model::{Action, Bounds};
use super::order::OrderStep;
use super::*;

/// Whether `action` is a fault striking, as `faults.rs` and the pipeline
/// strike them; not the end of one (Redis back, a queued script run,
/// PostgreSQL started), nor time, nor replication merely held back (the
/// failover is the fault). Exhaustive: a new action must be sorted here.
fn strikes(action: Action) -> bool {
    match action {
        Action::Crash(_)
        | Action::Freeze(_)
        | Action::Vanish
        | Action::Restart(_)
        | Action::Failover
        | Action::RedisDown
        | Action::CutOff(_)
        | Action::DatabaseCrash(_)
        | Action::AnswerLost(_) => true,
        Action::Step(_)
        | Action::Tick
        | Action::LateTick(_)
        | Action::HoldReplication
        | Action::RedisBack
        | Action::Deliver(_) => false,
        Action::Order(step) => match step {
            OrderStep::WorkerCrash
            | OrderStep::PostgresStop
            | OrderStep::Expire(_)
            | OrderStep::DataLoss => true,
            OrderStep::Worker
            | OrderStep::PostgresStart
            | OrderStep::Pay(_)
            | OrderStep::GiveBack(_)
            | OrderStep::Record(_) => false,
        },
    }
}

/// Whether a fault may strike within `bounds` (a scenario whose fault is
/// there from the start, nodes down or a clock ahead, or is time itself,
/// work outliving its lease, has none to strike).
fn has_fault(b: &Bounds) -> bool {
    let o = b.orders.unwrap_or_default();
    let counts = [
        b.crashes,
        b.pauses,
        b.vanishes,
        b.restarts,
        b.failovers,
        b.outages,
        b.cutoffs,
        b.db_crashes,
        b.lost_answers,
        o.worker_crashes,
        o.postgres_stops,
        o.data_losses,
    ];
    counts.iter().any(|&n| n > 0) || o.reservations
}

/// Every cell whose verdict rests on a witness, in a scenario with a fault
/// to strike, rests on one where the fault strikes and a unit is sold
/// after it: `safe` shown through the pause, the cut-off call, the crash,
/// the vanished lock, the failover, not beside them.
#[test]
fn every_witness_sells_through_its_scenarios_fault() {
    let mut faultless = Vec::new();
    let mut witnessed = 0;
    for (variant, scenario) in cells() {
        let v = check(variant, scenario).expect("a modelled cell");
        if v.broken.is_some() || !has_fault(&v.bounds) {
            continue;
        }
        witnessed += 1;
        let struck = v.witness.iter().position(|s| strikes(s.action));
        let sold_after = struck.is_some_and(|k| {
            v.witness[k + 1..]
                .iter()
                .any(|s| s.text.contains("sells unit"))
        });
        if !sold_after {
            faultless.push(format!(
                "{variant} {scenario} ({}): {:?}",
                v.model,
                v.witness
                    .iter()
                    .map(|s| s.text.as_str())
                    .collect::<Vec<_>>()
            ));
        }
    }
    assert!(witnessed > 0);
    let safe = faultless.iter().filter(|c| c.contains("(safe)")).count();
    assert!(
        faultless.is_empty(),
        "{} of {witnessed} witnessed cells with a fault ({safe} safe) sell beside it, not through it: {faultless:#?}",
        faultless.len()
    );
}
