//! `stocklock replay --all`: every counterexample of the checker's matrix
//! replayed live, each on the stack it needs: one shared stack for most,
//! one with the order pipeline for the order cells, one of its own for a
//! cell that kills Redlock nodes or fails the Redis over. The cells replays cannot play are listed
//! with why.

use std::time::Instant;

use super::{
    Beside, Replay, fails_over, kills_nodes, needs_orders, replay_on, stack_for, start_failover,
    start_orders, unsupported,
};
use crate::check;
use crate::harness::TargetArgs;
use crate::harness::stack::Stack;

/// One replayed cell, and how long its replay took.
#[derive(Clone, Debug, serde::Serialize)]
pub(super) struct Replayed {
    #[serde(flatten)]
    pub(super) replay: Replay,
    pub(super) seconds: f64,
}

/// A cell with a counterexample that replays cannot play.
#[derive(Clone, Debug, serde::Serialize)]
pub(super) struct NotReplayed {
    pub(super) variant: &'static str,
    pub(super) scenario: &'static str,
    pub(super) why: String,
}

/// What `--all` did.
#[derive(Clone, Debug, serde::Serialize)]
pub(super) struct All {
    pub(super) cells: Vec<Replayed>,
    pub(super) not_replayed: Vec<NotReplayed>,
    pub(super) seconds: f64,
}

/// Replays every counterexample cell of the matrix.
pub(super) async fn all(echo: bool, lease_ms: u64) -> anyhow::Result<All> {
    let started = Instant::now();
    let own = TargetArgs::default();
    let (_redis, shared, shared_url) = stack_for(&own, echo, None, Beside::default()).await?;
    let mut orders: Option<(Stack, String)> = None;
    let mut cells = Vec::new();
    let mut not_replayed = Vec::new();
    let played = async {
        for (variant, scenario) in check::cells() {
            let Some(verdict) = check::check(variant, scenario) else {
                continue;
            };
            if verdict.broken.is_none() {
                continue;
            }
            if let Some(why) = unsupported(&verdict) {
                not_replayed.push(NotReplayed {
                    variant: verdict.variant,
                    scenario: verdict.scenario,
                    why,
                });
                continue;
            }
            let began = Instant::now();
            let replay = if needs_orders(&verdict) {
                if orders.is_none() {
                    orders = Some(start_orders(echo).await?);
                }
                let (stack, url) = orders.as_ref().expect("started above");
                replay_on(stack, url, url, &verdict, lease_ms).await
            } else if kills_nodes(&verdict) {
                // The nodes it starts again stop with it: a stack of its own.
                let (_redis, stack, url) = stack_for(&own, echo, None, Beside::default()).await?;
                let replay = replay_on(&stack, &url, &url, &verdict, lease_ms).await;
                stack.stop().await;
                replay
            } else if fails_over(&verdict) {
                // A failover cannot be undone: a stack of its own.
                let (gates, stack, url) = start_failover(echo).await?;
                let replay = replay_on(&stack, &url, &gates.url(), &verdict, lease_ms).await;
                stack.stop().await;
                replay
            } else {
                replay_on(&shared, &shared_url, &shared_url, &verdict, lease_ms).await
            };
            let replay = replay.map_err(|err| err.context(format!("{variant} in {scenario}")))?;
            cells.push(Replayed {
                replay,
                seconds: began.elapsed().as_secs_f64(),
            });
        }
        anyhow::Ok(())
    }
    .await;
    shared.stop().await;
    if let Some((stack, _)) = orders {
        stack.stop().await;
    }
    played?;
    Ok(All {
        cells,
        not_replayed,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The table of `--all`, and the cells not replayed; `true` when every
/// replay agreed with the model.
pub(super) fn report(all: &All) -> bool {
    println!(
        "| variant | scenario | the model breaks | steps | live | agrees | the history checker | seconds |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for cell in &all.cells {
        let r = &cell.replay;
        println!(
            "| `{}` | {} | {} | {} | {} | {} | {}{} | {:.1} |",
            r.variant,
            r.scenario,
            r.property,
            r.steps.len(),
            r.live,
            if r.agrees { "yes" } else { "NO" },
            r.history,
            r.disagreement
                .as_ref()
                .map(|why| format!(" (DISAGREES: {why})"))
                .unwrap_or_default(),
            cell.seconds
        );
    }
    let agreed = all.cells.iter().filter(|c| c.replay.agrees).count();
    let judged_alike = all
        .cells
        .iter()
        .filter(|c| c.replay.disagreement.is_none())
        .count();
    println!(
        "\n{agreed} of {} replayed counterexamples break live as in the model, {judged_alike} judged alike by the history checker; {} not replayed ({:.0} s in all):",
        all.cells.len(),
        all.not_replayed.len(),
        all.seconds
    );
    for cell in &all.not_replayed {
        println!("- {} in {}: {}", cell.variant, cell.scenario, cell.why);
    }
    agreed == all.cells.len() && judged_alike == all.cells.len()
}
