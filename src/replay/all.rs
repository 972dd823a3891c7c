//! `stocklock replay --all`: every counterexample of the checker's matrix
//! replayed live, each on the stack it needs: one shared stack for most,
//! one with the order pipeline for the order cells, one of its own for a
//! cell that kills Redlock nodes or fails the Redis over (those played
//! beside the others, `--jobs`). The cells replays cannot play are listed
//! with why.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use super::{
    Beside, Replay, fails_over, kills_nodes, needs_orders, replay_on, stack_for, start_failover,
    start_orders, unsupported,
};
use crate::check;
use crate::harness::TargetArgs;
use crate::harness::stack::Stack;
use crate::variants::{Scenario, Variant};

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

/// What a cell of `--all` is: one to replay on the shared stack (or the
/// one with the order pipeline), on a stack of its own, or not at all.
enum Kind {
    Shared,
    Apart,
    Skipped(NotReplayed),
}

/// The verdict of cell `(variant, scenario)` with a counterexample, and
/// where it plays; `None` when the model breaks nothing there. Computed on
/// a blocking thread: Redlock's models take seconds, which would stall the
/// other lanes' gates.
async fn sort(variant: Variant, scenario: Scenario) -> Option<(check::Verdict, Kind)> {
    let verdict = tokio::task::spawn_blocking(move || check::check(variant, scenario))
        .await
        .ok()??;
    verdict.broken?;
    let kind = if let Some(why) = unsupported(&verdict) {
        Kind::Skipped(NotReplayed {
            variant: verdict.variant,
            scenario: verdict.scenario,
            why,
        })
    } else if kills_nodes(&verdict) || fails_over(&verdict) {
        Kind::Apart
    } else {
        Kind::Shared
    };
    Some((verdict, kind))
}

/// Replays every counterexample cell of the matrix: the cells of the
/// shared stack (and of the one with the order pipeline) one after
/// another, and beside them, `jobs - 1` at a time, the cells that need a
/// stack of their own (a failover, Redlock nodes killed). In the matrix's
/// order in the report.
pub(super) async fn all(echo: bool, lease_ms: u64, jobs: usize) -> anyhow::Result<All> {
    let started = Instant::now();
    let cells_in_order = check::cells();
    // The model's verdicts, computed while the first replays play.
    check::warm(cells_in_order.clone());
    let own = TargetArgs::default();
    let (_redis, shared, shared_url) = stack_for(&own, echo, None, Beside::default()).await?;
    let mut orders: Option<(Stack, String)> = None;
    let mut not_replayed = Vec::new();
    let shared_lane = async {
        let mut cells = Vec::new();
        for (at, &(variant, scenario)) in cells_in_order.iter().enumerate() {
            let Some((verdict, kind)) = sort(variant, scenario).await else {
                continue;
            };
            let began = Instant::now();
            let replay = match kind {
                Kind::Skipped(skipped) => {
                    not_replayed.push(skipped);
                    continue;
                }
                Kind::Apart => continue,
                Kind::Shared if needs_orders(&verdict) => {
                    if orders.is_none() {
                        orders = Some(start_orders(echo).await?);
                    }
                    let (stack, url) = orders.as_ref().expect("started above");
                    replay_on(stack, url, url, &verdict, lease_ms).await
                }
                Kind::Shared => {
                    replay_on(&shared, &shared_url, &shared_url, &verdict, lease_ms).await
                }
            };
            let replay = replay.map_err(|err| err.context(format!("{variant} in {scenario}")))?;
            cells.push((at, replayed(replay, began)));
        }
        anyhow::Ok(cells)
    };
    let next = AtomicUsize::new(0);
    let apart_lanes = (1..jobs.max(2)).map(|_| async {
        let mut cells = Vec::new();
        loop {
            let at = next.fetch_add(1, Ordering::Relaxed);
            let Some(&(variant, scenario)) = cells_in_order.get(at) else {
                break;
            };
            let Some((verdict, Kind::Apart)) = sort(variant, scenario).await else {
                continue;
            };
            let began = Instant::now();
            let replay = if kills_nodes(&verdict) {
                // The nodes it starts again stop with it: a stack of its own.
                let (_redis, stack, url) = stack_for(&own, echo, None, Beside::default()).await?;
                let replay = replay_on(&stack, &url, &url, &verdict, lease_ms).await;
                stack.stop().await;
                replay
            } else {
                // A failover cannot be undone: a stack of its own.
                let (gates, stack, url) = start_failover(echo).await?;
                let replay = replay_on(&stack, &url, &gates.url(), &verdict, lease_ms).await;
                stack.stop().await;
                replay
            };
            let replay = replay.map_err(|err| err.context(format!("{variant} in {scenario}")))?;
            cells.push((at, replayed(replay, began)));
        }
        anyhow::Ok(cells)
    });
    let (shared_cells, apart_cells) =
        futures_util::future::join(shared_lane, futures_util::future::join_all(apart_lanes)).await;
    shared.stop().await;
    if let Some((stack, _)) = orders {
        stack.stop().await;
    }
    let mut cells = shared_cells?;
    for lane in apart_cells {
        cells.extend(lane?);
    }
    cells.sort_by_key(|(at, _)| *at);
    Ok(All {
        cells: cells.into_iter().map(|(_, cell)| cell).collect(),
        not_replayed,
        seconds: started.elapsed().as_secs_f64(),
    })
}

fn replayed(replay: Replay, began: Instant) -> Replayed {
    Replayed {
        replay,
        seconds: began.elapsed().as_secs_f64(),
    }
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
