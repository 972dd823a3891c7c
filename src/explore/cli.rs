//! `stocklock explore`'s command line.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;

use super::matrix;
use super::{Explored, Strategy, explore};
use crate::chaos::mutant::{self, Mutant};
use crate::harness::TargetArgs;
use crate::harness::stack::Stack;
use crate::variants::{Scenario, Variant};

#[derive(Args, Debug)]
pub struct ExploreArgs {
    /// The variant whose sales are explored (its cell with --scenario).
    #[arg(long, value_parser = crate::args::parse_variant, required_unless_present = "all")]
    pub variant: Option<Variant>,
    /// The scenario: its faults are the ones struck, at random steps.
    #[arg(long, value_enum, required_unless_present = "all")]
    pub scenario: Option<Scenario>,
    /// Explore every cell of the matrix the explorer can play, on one
    /// stack: --schedules of each cell the checker finds safe (all must
    /// pass), up to --hunt of each cell where it has a counterexample
    /// (each must break); the cells it cannot play are listed with why.
    #[arg(long, conflicts_with_all = ["variant", "scenario", "timelines"])]
    pub all: bool,
    /// How many schedules at most (it stops at the first violation).
    #[arg(long, default_value_t = 100)]
    pub schedules: usize,
    /// With --all: how many schedules a counterexample cell may take.
    #[arg(long, default_value_t = 1000, requires = "all")]
    pub hunt: usize,
    /// The first schedule's seed; each next one adds 1.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How the next buyer is picked: pct (random priorities, with two
    /// change points where the running buyer drops to the lowest), or
    /// random (uniformly at every step).
    #[arg(long, value_enum, default_value_t = Strategy::Pct)]
    pub strategy: Strategy,
    /// Also write the result as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write every schedule's history (what its buyers were told, and the
    /// books read after it) to FILE, JSON Lines in the format of
    /// `stocklock history check`, each schedule's SKU named by its run
    /// (`explore-VARIANT-SCENARIO-SEED/x-VARIANT`). Every schedule is judged by the
    /// history checker beside the ledger either way.
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
    /// Draw the violating schedule's live timeline into this directory
    /// (SCENARIO-VARIANT-explore.html), beside the checker's shortest
    /// counterexample of the cell (SCENARIO-VARIANT-model.html).
    #[arg(long, value_name = "DIR")]
    pub timelines: Option<PathBuf>,
    /// Run the instances with this live mutant: one mechanism of the locks
    /// taken out, to see exploration find what it prevents. Debug builds
    /// only (the builds `cargo test` makes); a release build refuses it.
    #[arg(long, value_enum, value_name = "MUTANT", conflicts_with = "target")]
    pub mutant: Option<Mutant>,
    #[command(flatten)]
    pub target: TargetArgs,
}

/// `stocklock explore`: `Ok(false)` (exit 2) when a schedule broke a property.
pub async fn run(args: ExploreArgs) -> anyhow::Result<bool> {
    if args.mutant.is_some() && !mutant::AVAILABLE {
        bail!(
            "--mutant: live mutants exist only in debug builds (cargo build, cargo test); this is a release build"
        );
    }
    // The order pipeline runs where a variant's sales become orders (each
    // schedule of theirs is reconciled); etcd and ZooKeeper where their
    // locks are explored.
    // On a stack of its own, the gates meet in a Redis apart: a schedule
    // goes on while the stock's Redis is paused (`redis-pause`).
    let gates = match args.target.target {
        None => Some(crate::up::redis::RedisServer::start(None).await?),
        Some(_) => None,
    };
    // And its own PostgreSQL for the orders, which a schedule may stop
    // (and for the variants whose stock it keeps).
    let orders = args.all
        || args
            .variant
            .is_some_and(|v| v.orders() || v.stock_in_postgres());
    let postgres = match (orders, &args.target.target) {
        (true, None) => Some(crate::up::postgres::PostgresServer::start(None).await?),
        _ => None,
    };
    let beside = crate::replay::Beside {
        orders,
        etcd: u8::from(args.all || args.variant == Some(Variant::Etcd)),
        zookeeper: u8::from(args.all || args.variant == Some(Variant::ZooKeeper)),
        gate_redis: gates.as_ref().map(|g| g.url()),
        postgres_url: postgres.as_ref().map(|p| p.url()),
    };
    let (_redis, stack, redis_url) =
        crate::replay::stack_for(&args.target, false, args.mutant, beside).await?;
    let postgres = postgres.map(|p| std::sync::Arc::new(tokio::sync::Mutex::new(p)));
    let redises = super::Redises {
        gates: gates.as_ref().map_or(redis_url.clone(), |g| g.url()),
        stock: redis_url,
        postgres: postgres.clone(),
    };
    let (Some(variant), Some(scenario)) = (args.variant, args.scenario) else {
        let run = matrix::all(
            &stack,
            &redises,
            args.strategy,
            (args.schedules, args.hunt),
            args.seed,
        )
        .await;
        stack.stop().await;
        return report_all(&args, run?);
    };
    let explored = explore(
        &stack,
        &redises,
        variant,
        scenario,
        args.strategy,
        args.schedules,
        args.seed,
    )
    .await;
    let drawn = match (&explored, &args.timelines) {
        (Ok(Explored { found: Some(_), .. }), Some(dir)) => {
            let name = format!("{scenario}-{variant}-explore.html");
            Some(draw(&stack, variant, &dir.join(name)).await)
        }
        _ => None,
    };
    stack.stop().await;
    let explored = explored?;
    println!(
        "{} in {}{}: {} schedules ({:?}), {:.1} a second",
        explored.variant,
        explored.scenario,
        args.mutant
            .map(|m| format!(" with the live mutant {m}"))
            .unwrap_or_default(),
        explored.schedules,
        explored.strategy,
        explored.per_second
    );
    if !explored.struck.is_empty() {
        let struck: Vec<String> = (explored.struck.iter())
            .map(|(fault, n)| format!("{fault} in {n}"))
            .collect();
        println!("faults struck (schedules): {}", struck.join(", "));
    }
    match &explored.found {
        None => println!("no schedule broke a property"),
        Some(schedule) => {
            println!(
                "schedule {} (seed {}) broke a property: {}; the history checker: {}",
                explored.until_found.unwrap_or_default(),
                schedule.seed,
                schedule.ledger,
                schedule.history
            );
            for (k, step) in schedule.steps.iter().enumerate() {
                println!("{:>3}. {step:?}", k + 1);
            }
        }
    }
    if let (Some(drawn), Some(dir)) = (drawn, &args.timelines) {
        println!("drawn: {}", drawn?.display());
        // Beside it, the checker's shortest way to a violation of the cell.
        let model = dir.join(format!("{scenario}-{variant}-model.html"));
        match crate::check::check(variant, scenario) {
            Some(verdict) if crate::check::draw::write(&verdict, &model)? => {
                println!("the model's counterexample: {}", model.display());
            }
            _ => println!("the model has no counterexample of this cell to draw beside it"),
        }
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&explored)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(schedule) = &explored.disagreed {
        println!(
            "schedule seed {}: THE TWO JUDGES DISAGREE: {} (ledger: {}; history: {})",
            schedule.seed,
            schedule.disagreement.as_deref().unwrap_or_default(),
            schedule.ledger,
            schedule.history
        );
    }
    write_histories(args.history.as_deref(), &explored.histories)?;
    Ok(explored.found.is_none() && explored.disagreed.is_none())
}

/// The live timeline of the last schedule of `variant` (the violating one).
async fn draw(stack: &Stack, variant: Variant, path: &Path) -> anyhow::Result<PathBuf> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let html = stack
        .client
        .timeline_export(&format!("x-{variant}"))
        .await?;
    std::fs::write(path, html).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path.to_owned())
}

/// `--history`: every schedule's history, into `path`.
fn write_histories(path: Option<&Path>, histories: &str) -> anyhow::Result<()> {
    if let Some(path) = path {
        std::fs::write(path, histories)
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("explore: every schedule's history in {}", path.display());
    }
    Ok(())
}

/// `--all`'s table, and its JSON: `Ok(false)` when a cell disagreed.
fn report_all(args: &ExploreArgs, matrix: matrix::Matrix) -> anyhow::Result<bool> {
    let (cells, skipped) = (matrix.cells, matrix.skipped);
    println!(
        "| variant | scenario | model | schedules | a second | faults struck (schedules) | found after | agrees |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for cell in &cells {
        let e = &cell.explored;
        let struck: Vec<String> = (e.struck.iter())
            .map(|(fault, n)| format!("{fault} {n}"))
            .collect();
        println!(
            "| `{}` | {} | {} | {} | {:.1} | {} | {} | {} |",
            e.variant,
            e.scenario,
            cell.model,
            e.schedules,
            e.per_second,
            match struck.is_empty() {
                true => "-".to_owned(),
                false => struck.join(", "),
            },
            e.until_found.map_or("-".to_owned(), |n| n.to_string()),
            if cell.agrees { "yes" } else { "NO" }
        );
    }
    let disagree = cells.iter().filter(|c| !c.agrees).count();
    println!(
        "{} cells explored, {} schedules, {disagree} disagreeing; {} cells not played",
        cells.len(),
        cells.iter().map(|c| c.explored.schedules).sum::<usize>(),
        skipped.len()
    );
    for (variant, scenario, why) in &skipped {
        println!("not played: {variant} in {scenario}: {why}");
    }
    if let Some(path) = &args.json {
        let skipped: Vec<_> = skipped
            .iter()
            .map(|(v, s, why)| serde_json::json!({"variant": v.name(), "scenario": s.name(), "why": why}))
            .collect();
        let json =
            serde_json::json!({"cells": cells, "not_played": skipped, "errors": matrix.errors});
        std::fs::write(path, serde_json::to_string_pretty(&json)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let histories: String = cells
        .iter()
        .map(|c| c.explored.histories.as_str())
        .collect();
    write_histories(args.history.as_deref(), &histories)?;
    for errored in &matrix.errors {
        println!(
            "not explored: {} in {}: {}",
            errored.variant, errored.scenario, errored.error
        );
    }
    if !matrix.errors.is_empty() {
        bail!("{} cells could not be explored", matrix.errors.len());
    }
    Ok(disagree == 0)
}
