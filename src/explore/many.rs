//! Many schedules of one cell, until one breaks a property.

use std::time::Instant;

use super::{Redises, Schedule, Strategy, one};
use crate::check::protocol::Protocol;
use crate::harness::stack::Stack;
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
    /// The first schedule where the history checker and the ledger's
    /// verdict disagree on safety (it fails the exploration too).
    pub disagreed: Option<Schedule>,
    /// Every schedule's history, one after another (`--history`).
    #[serde(skip)]
    pub histories: String,
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
    let mut histories = String::new();
    // A failover cannot be undone: each schedule on a stack of its own.
    let fails_over = crate::check::bounds(scenario, Protocol::of(variant)).failovers > 0;
    let mut disagreed = None;
    while run < schedules && found.is_none() && disagreed.is_none() {
        let seed = seed + run as u64;
        let schedule = match fails_over {
            false => one(stack, redises, variant, scenario, strategy, seed).await?,
            true => {
                let own = super::run::failover::own_stack(variant).await?;
                let schedule =
                    one(&own.stack, &own.redises, variant, scenario, strategy, seed).await;
                own.stack.stop().await;
                schedule?
            }
        };
        run += 1;
        histories.push_str(&schedule.recorded);
        let mut kinds: Vec<&'static str> = (schedule.steps.iter())
            .filter_map(super::Choice::fault)
            .collect();
        kinds.sort_unstable();
        kinds.dedup();
        for kind in kinds {
            *struck.entry(kind).or_insert(0) += 1;
        }
        // The two judges must agree: one of them is wrong, and the
        // exploration says which the evidence contradicts.
        if let Some(why) = &schedule.disagreement {
            eprintln!(
                "explore: {variant} in {scenario}, seed {seed}: THE TWO JUDGES DISAGREE: {why} \
                 (ledger: {}; history: {})",
                schedule.ledger, schedule.history
            );
            disagreed = Some(schedule.clone());
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
        disagreed,
        histories,
    })
}
