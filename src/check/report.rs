//! The command: which cells to check, the table with each counterexample's
//! steps, the bounds, and the JSON.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;

use super::{Limits, Verdict, cells, check_within};
use crate::variants::Scenario;
use crate::variants::Variant;

/// Model-check each variant's protocol in the lab's scenarios: every
/// order of the buyers' commands and the faults, within small bounds;
/// the shortest counterexample of each failure. Exit 2 when a model
/// disagrees with its variant's claim in the matrix.
#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    /// Only these variants (repeat or comma-separate; default: every one
    /// with a model).
    #[arg(long, value_delimiter = ',', value_parser = crate::args::parse_variant)]
    pub variant: Vec<Variant>,
    /// Only these scenarios (repeat or comma-separate; default: every one
    /// with a model).
    #[arg(long, value_delimiter = ',', value_enum)]
    pub scenario: Vec<Scenario>,
    /// Every cell with this many buyers (default: each scenario's own, 3).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=4))]
    pub buyers: Option<u8>,
    /// Every cell with this many units in stock (default: 2).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=4))]
    pub stock: Option<u8>,
    /// Every cell with a lease of this many ticks (default: 2).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=4))]
    pub lease: Option<u8>,
    /// Also write every cell as JSON: {"cells":[{variant, scenario, claim,
    /// model, agrees, states, millis, bounds, broken, trace, witnessed,
    /// witness}]}: a counterexample's steps, or the witness's (the
    /// schedule a verdict with no counterexample rests on).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Draw each counterexample (or, with none, the witness) as the
    /// timeline draws a live run (a lane per buyer, the faults marked) into
    /// this directory: one self-contained HTML file per cell,
    /// VARIANT-SCENARIO-model.html.
    #[arg(long, value_name = "DIR")]
    pub timelines: Option<PathBuf>,
}

/// Checks the cells asked for and prints them; `Ok(false)` (exit 2) when a
/// model disagrees with its variant's claim.
pub fn run(args: CheckArgs) -> anyhow::Result<bool> {
    let variants = &args.variant;
    let wanted = |variant: Variant, scenario: Scenario| {
        (variants.is_empty() || variants.contains(&variant))
            && (args.scenario.is_empty() || args.scenario.contains(&scenario))
    };
    let limits = Limits {
        buyers: args.buyers,
        stock: args.stock,
        lease: args.lease,
    };
    let started = Instant::now();
    let verdicts: Vec<Verdict> = cells()
        .into_iter()
        .filter(|&(variant, scenario)| wanted(variant, scenario))
        .filter_map(|(variant, scenario)| check_within(variant, scenario, &limits))
        .collect();
    if verdicts.is_empty() {
        println!(
            "no cell of the matrix matches (a scenario that does not apply to a variant has no cell: docs/lab.md shows the matrix)"
        );
    } else {
        print!("{}", table(&verdicts));
    }
    let (closing, agree) = closing(&verdicts, started.elapsed().as_secs_f64());
    println!("\n{closing}");
    if let Some(dir) = &args.timelines {
        let written = write_timelines(dir, &verdicts)?;

        println!(
            "drew {written} counterexamples and witnesses into {}",
            dir.display()
        );
    }
    if let Some(path) = &args.json {
        let json = serde_json::json!({ "cells": verdicts });
        std::fs::write(path, serde_json::to_vec_pretty(&json)?)?;
        println!("wrote {}", path.display());
    }
    Ok(agree)
}

/// The last line: how many cells, in how long, and whether every model
/// agrees with its variant's claim (`false`: the command exits 2; a
/// vacuous cell never agrees).
pub fn closing(verdicts: &[Verdict], seconds: f64) -> (String, bool) {
    let disagree = verdicts.iter().filter(|v| !v.agrees).count();
    let line = format!(
        "{} cells checked in {seconds:.1} s: {}",
        verdicts.len(),
        match disagree {
            0 => "every model agrees with its variant's claim".to_owned(),
            n => format!("{n} disagree with their variant's claim"),
        }
    );
    (line, disagree == 0)
}

/// The table: a line per cell, each counterexample's steps under it, then
/// the bounds of each scenario checked.
pub fn table(verdicts: &[Verdict]) -> String {
    let mut out = format!(
        "{:<15} {:<20} {:<10} {:<10} {:>7} {:>5}  result\n",
        "variant", "scenario", "claim", "model", "states", "ms"
    );
    for v in verdicts {
        let result = match (v.broken, v.witnessed) {
            (Some(property), _) => format!(
                "counterexample in {} (breaks \"{property}\")",
                super::steps_in_words(v.trace.len())
            ),
            (None, Some(property)) => format!(
                "no violation within bounds in {} states; witness in {} (\"{property}\")",
                v.states,
                super::steps_in_words(v.witness.len())
            ),
            (None, None) => format!(
                "VACUOUS: no schedule within bounds shows a verdict ({} states)",
                v.states
            ),
        };
        let mark = if v.agrees { "" } else { "  << DISAGREES" };
        out += &format!(
            "{:<15} {:<20} {:<10} {:<10} {:>7} {:>5}  {result}{mark}\n",
            v.variant, v.scenario, v.claim, v.model, v.states, v.millis
        );
        for (n, step) in v.schedule().map_or(&[][..], |(_, s)| s).iter().enumerate() {
            out += &format!("{:>40}. t={} {}\n", n + 1, step.at, step.text);
        }
    }
    // A scenario's bounds, with the variants they apply to when they
    // differ between variants (Redlock's nodes).
    let mut groups: Vec<(&str, String, Vec<&str>)> = Vec::new();
    for v in verdicts {
        let bounds = describe_bounds(v);
        match groups
            .iter_mut()
            .find(|(s, b, _)| *s == v.scenario && *b == bounds)
        {
            Some((_, _, variants)) => variants.push(v.variant),
            None => groups.push((v.scenario, bounds, vec![v.variant])),
        }
    }
    out += "\nbounds (per scenario; buyers A, B, C...; time in ticks):\n";
    for (scenario, bounds, variants) in &groups {
        let shared = groups.iter().filter(|(s, _, _)| s == scenario).count() > 1;
        let which = if shared {
            format!(" ({})", variants.join(", "))
        } else {
            String::new()
        };
        out += &format!("  {scenario}{which}: {bounds}\n");
    }
    out
}

fn describe_bounds(v: &Verdict) -> String {
    let b = v.bounds;
    let ticks = if b.freeze == 0 { b.lease + 1 } else { b.freeze };
    let unit = if ticks == 1 { "tick" } else { "ticks" };
    let crash_at = match b.crash_only_in_work {
        true => "during the work",
        false => "anywhere",
    };
    let orders = b.orders.unwrap_or_default();
    // Each bound that is set, `{n}` its count (flags count 1).
    let set: Vec<(u8, String)> = vec![
        (b.buyers, "{n} buyers".into()),
        (b.stock, "stock {n}".into()),
        // Shown even when 0.
        (1, format!("lease {}", b.lease)),
        (1, format!("work {}", b.work)),
        (b.horizon, "up to tick {n}".into()),
        (b.one_process.into(), "one process".into()),
        (b.crashes, format!("{{n}} crash {crash_at}")),
        (
            b.pauses,
            format!("{{n}} freeze of {ticks} {unit} anywhere in a section"),
        ),
        (
            b.vanishes,
            match b.vanish_early {
                true => "{n} deletion of the lock while its holder works, before its next renewal",
                false => "{n} deletion of the lock at any moment of its holder's section",
            }
            .into(),
        ),
        (
            b.late_renewals,
            "{n} ticks on which a holder's renewal comes late".into(),
        ),
        (
            b.slow_votes,
            "{n} ticks within Redlock rounds (slow nodes)".into(),
        ),
        (
            b.nodes,
            format!(
                "{{n}} Redlock nodes ({} down from the start)",
                b.nodes_down
            ),
        ),
        (
            b.restarts,
            "up to {n} nodes restarting empty (under a frozen holder) or coming back".into(),
        ),
        (
            b.failovers,
            match b.hold_early {
                true => "{n} failover (replication held back before the lock is taken, then the replica promoted; replication resumes)",
                false => "{n} failover (replication held back at any moment, then the replica promoted; replication resumes)",
            }
            .into(),
        ),
        (
            b.one_request.into(),
            "every buyer a retry of one request id".into(),
        ),
        (
            b.wait_replicas.into(),
            "the holder WAITs for a replica after taking the lock".into(),
        ),
        (b.skew, "the last buyer's clock {n} ticks ahead".into()),
        (
            b.outages,
            "{n} Redis outage (every call a 503 meanwhile), back empty and reset".into(),
        ),
        (
            b.cutoffs,
            "{n} calls cut off by a paused Redis (told unknown, the script queued), each buyer retrying its own request id".into(),
        ),
        (
            b.db_crashes,
            "{n} crash of PostgreSQL under the buyers (open transactions rolled back, a commit's answer possibly lost), each buyer retrying its own request id".into(),
        ),
        (
            b.lost_answers,
            "{n} commit's answer lost on its way back (the sale committed, its buyer told unknown), each buyer retrying its own request id".into(),
        ),
        (
            b.orders.is_some().into(),
            "each sale's order through the stream, the worker and PostgreSQL".into(),
        ),
        (
            orders.worker_crashes,
            "{n} worker death between its commit and its XACK".into(),
        ),
        (
            orders.postgres_stops,
            "{n} stop of PostgreSQL, then a start".into(),
        ),
        (
            orders.reservations.into(),
            "each reservation paid or expired, an expired one's unit given back".into(),
        ),
        (
            orders.data_losses,
            "{n} Redis restart with nothing kept, then a reset".into(),
        ),
    ];
    set.into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, words)| words.replace("{n}", &n.to_string()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Writes each counterexample's drawing into `dir`; how many.
pub fn write_timelines(dir: &std::path::Path, verdicts: &[Verdict]) -> anyhow::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let mut written = 0;
    for v in verdicts {
        let path = dir.join(format!("{}-{}-model.html", v.variant, v.scenario));
        written += usize::from(super::draw::write(v, &path)?);
    }
    Ok(written)
}
