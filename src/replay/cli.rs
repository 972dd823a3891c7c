//! `stocklock replay`'s command: the cell's counterexample replayed on a
//! stack of the command's own (or `--target`), printed step by step.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;

use super::{
    Beside, Replay, fails_over, kills_nodes, needs_orders, replay_on, sku_of, stack_for,
    start_failover, start_orders, unsupported,
};
use crate::check::{self, Verdict};
use crate::harness::TargetArgs;
use crate::harness::stack::Stack;
use crate::variants::{Scenario, Variant};

/// Replays the counterexample of the cell `args` names on a stack of its
/// own; with `--timelines`, writes the live run's timeline beside the
/// model's drawing.
pub async fn replay(args: &ReplayArgs) -> anyhow::Result<Replay> {
    let (Some(variant), Some(scenario)) = (args.variant, args.scenario) else {
        bail!("--variant and --scenario name the cell to replay (or --all)");
    };
    let verdict = check::check(variant, scenario)
        .with_context(|| format!("{variant} claims nothing in {scenario}: no cell"))?;
    if let Some(why) = unsupported(&verdict) {
        bail!("cannot replay {variant} in {scenario}: {why}");
    }
    let own = args.target.target.is_none();
    if !own && (kills_nodes(&verdict) || fails_over(&verdict)) {
        bail!(
            "cannot replay {variant} in {scenario} on --target: it kills Redis servers (Redlock nodes or the master), which needs a stack of its own"
        );
    }
    // The Redis the gates meet on, when apart from the stack's.
    let mut gates = None;
    let (_redis, stack, redis_url) = match needs_orders(&verdict) {
        true if own => {
            let (stack, url) = start_orders(args.echo).await?;
            (None, stack, url)
        }
        false if fails_over(&verdict) => {
            let (apart, stack, url) = start_failover(args.echo).await?;
            gates = Some(apart);
            (None, stack, url)
        }
        _ => stack_for(&args.target, args.echo, None, Beside::default()).await?,
    };
    let gates_url = gates.as_ref().map_or(redis_url.clone(), |g| g.url());
    let mut result = replay_on(&stack, &redis_url, &gates_url, &verdict, args.lease_ms).await;
    if let (Ok(_), Some(dir)) = (&result, &args.timelines)
        && let Err(err) = drawings(&stack, &verdict, dir).await
    {
        result = Err(err);
    }
    stack.stop().await;
    result
}

/// Writes the live run's timeline (`SCENARIO-VARIANT-replay.html`) and the
/// model's trace (`SCENARIO-VARIANT-model.html`) into `dir`.
async fn drawings(stack: &Stack, verdict: &Verdict, dir: &std::path::Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let name = format!("{}-{}", verdict.scenario, verdict.variant);
    let live = stack.client.timeline_export(&sku_of(verdict)).await?;
    let path = dir.join(format!("{name}-replay.html"));
    std::fs::write(&path, live).with_context(|| format!("cannot write {}", path.display()))?;
    check::draw::write(verdict, &dir.join(format!("{name}-model.html")))?;
    println!(
        "drawn: {}",
        dir.join(format!("{name}-{{replay,model}}.html")).display()
    );
    Ok(())
}

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The variant whose counterexample is replayed (its cell with --scenario).
    #[arg(long, value_parser = crate::args::parse_variant, required_unless_present = "all")]
    pub variant: Option<Variant>,
    /// The scenario of the cell.
    #[arg(long, value_enum, required_unless_present = "all")]
    pub scenario: Option<Scenario>,
    /// Replay every counterexample of the matrix, each on the stack it
    /// needs (stacks of the command's own), and print a table; the cells
    /// replays cannot play are listed with why. Exit 2 when one disagrees.
    #[arg(long, conflicts_with_all = ["variant", "scenario", "timelines", "target"])]
    pub all: bool,
    /// With --all: stacks played at once. The cells of the shared stack
    /// play one after another; the cells that need a stack of their own (a
    /// failover, Redlock nodes killed) play beside them, `jobs - 1` at a
    /// time. Each failover stack runs a master, a replica and three
    /// Sentinels: more lanes need more cores.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(2..=4))]
    pub jobs: u64,
    /// The live lease, in ms: a tick on which the model's lease runs out
    /// waits for the live one to run out.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(100..=5000))]
    pub lease_ms: u64,
    /// Also write the replay as JSON: {variant, scenario, property, steps:
    /// [{model, live}], live, agrees, history, disagreement}; with --all, {cells: [the same, and
    /// seconds], not_replayed: [{variant, scenario, why}], seconds}.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the history of the replay (of every replay, with --all):
    /// what its buyers were told and the books read after, JSON Lines in
    /// the format of `stocklock history check`. Every replay is judged by
    /// the history checker beside the live ledger either way; where they
    /// disagree, the replay fails.
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
    /// Draw the live run's timeline (SCENARIO-VARIANT-replay.html) and
    /// the model's trace (SCENARIO-VARIANT-model.html) into this directory.
    #[arg(long, value_name = "DIR")]
    pub timelines: Option<PathBuf>,
    /// Show the stack's output.
    #[arg(long)]
    pub echo: bool,
    #[command(flatten)]
    pub target: TargetArgs,
}

/// `stocklock replay`: prints each step, the model's words beside the
/// live run's, then the verdicts; `Ok(false)` (exit 2) when they differ.
pub async fn run(args: ReplayArgs) -> anyhow::Result<bool> {
    if args.all {
        let all = super::all::all(args.echo, args.lease_ms, args.jobs as usize).await?;
        let agreed = super::all::report(&all);
        let histories: String = all
            .cells
            .iter()
            .map(|c| c.replay.recorded.as_str())
            .collect();
        write_history(args.history.as_deref(), &histories)?;
        if let Some(path) = &args.json {
            std::fs::write(path, serde_json::to_string_pretty(&all)?)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        return Ok(agreed);
    }
    let replay = replay(&args).await?;
    println!(
        "{} in {}: the model's counterexample breaks \"{}\"; replayed live:",
        replay.variant, replay.scenario, replay.property
    );
    for (k, step) in replay.steps.iter().enumerate() {
        println!("{:>3}. model: {}", k + 1, step.model);
        println!("     live:  {}", step.live);
    }
    println!(
        "live: {} -> {}",
        replay.live,
        match replay.agrees {
            true => "broken as the model says: they agree",
            false => "NOT broken: the live run disagrees with the model",
        }
    );
    println!("the history checker: {}", replay.history);
    if let Some(why) = &replay.disagreement {
        println!("the two judges DISAGREE: {why}");
    }
    write_history(args.history.as_deref(), &replay.recorded)?;
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&replay)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(replay.agrees && replay.disagreement.is_none())
}

/// `--history`: the replays' histories, into `path`.
fn write_history(path: Option<&std::path::Path>, recorded: &str) -> anyhow::Result<()> {
    if let Some(path) = path {
        std::fs::write(path, recorded)
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("replay: the history in {}", path.display());
    }
    Ok(())
}
