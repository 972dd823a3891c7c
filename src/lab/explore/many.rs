//! Many schedules of one cell, until one breaks a property.

use std::time::Instant;

use super::{Redises, Schedule, Strategy, one};
use crate::check::protocol::Protocol;
use crate::lab::stack::Stack;
use crate::variants::{Scenario, Variant};

/// What an exploration found.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Explored {
    pub variant: &'static str,
    pub scenario: &'static str,
    pub strategy: Strategy,
    pub schedules: usize,
    pub per_second: f64,
    /// Per fault (a step other than a release), in how many schedules it
    /// struck: what the exploration really played.
    pub struck: std::collections::BTreeMap<&'static str, usize>,
    /// The first schedule that broke a property, and how many it took.
    pub found: Option<Schedule>,
    pub until_found: Option<usize>,
}

/// Explores up to `schedules` schedules, seeds `seed`, `seed + 1`, ...,
/// stopping at the first violation.
pub async fn explore(
    stack: &Stack,
    redises: &Redises,
    variant: Variant,
    scenario: Scenario,
    strategy: Strategy,
    schedules: usize,
    seed: u64,
) -> anyhow::Result<Explored> {
    let started = Instant::now();
    let mut run = 0;
    let mut found = None;
    let mut struck = std::collections::BTreeMap::new();
    // A failover cannot be undone: each schedule on a stack of its own.
    let fails_over = crate::check::bounds(scenario, Protocol::of(variant)).failovers > 0;
    while run < schedules && found.is_none() {
        let seed = seed + run as u64;
        let schedule = match fails_over {
            false => one(stack, redises, variant, scenario, strategy, seed).await?,
            true => {
                let own = super::failover::own_stack(variant).await?;
                let schedule =
                    one(&own.stack, &own.redises, variant, scenario, strategy, seed).await;
                own.stack.stop().await;
                schedule?
            }
        };
        run += 1;
        let mut kinds: Vec<&'static str> = (schedule.steps.iter())
            .filter_map(super::Choice::fault)
            .collect();
        kinds.sort_unstable();
        kinds.dedup();
        for kind in kinds {
            *struck.entry(kind).or_insert(0) += 1;
        }
        // Shown, not yet failing: a schedule's history is not yet whole
        // (a buyer the explorer "crashes" is released when the schedule
        // ends and may still answer; a re-stock after Redis restarted and
        // units an expiry gave back are not recorded), so the history can
        // convict a schedule its ledger rightly clears.
        if let Some(why) = &schedule.disagreement {
            eprintln!(
                "explore: {variant} in {scenario}, seed {seed}: the history checker disagrees \
                 with the ledger: {why} (ledger: {}; history: {})",
                schedule.ledger, schedule.history
            );
        }
        if schedule.violation {
            found = Some(schedule);
        }
    }
    Ok(Explored {
        variant: variant.name(),
        scenario: scenario.name(),
        strategy,
        schedules: run,
        per_second: run as f64 / started.elapsed().as_secs_f64(),
        struck,
        until_found: found.as_ref().map(|_| run),
        found,
    })
}
