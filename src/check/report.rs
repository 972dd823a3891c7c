//! The command: which cells to check, the table with each counterexample's
//! steps, the bounds, and the JSON.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;

use super::{Verdict, cells, check};
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
    /// Also write every cell as JSON: {"cells":[{variant, scenario, claim,
    /// model, agrees, states, millis, bounds, broken, trace}], "not_modelled":[...]}.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Draw each counterexample as the timeline draws a live run (a lane
    /// per buyer, the faults marked) into this directory: one
    /// self-contained HTML file per cell, VARIANT-SCENARIO-model.html.
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
    let started = Instant::now();
    let verdicts: Vec<Verdict> = cells()
        .into_iter()
        .filter(|&(variant, scenario)| wanted(variant, scenario))
        .filter_map(|(variant, scenario)| check(variant, scenario))
        .collect();
    let not_modelled = not_modelled(&wanted);
    print!("{}", table(&verdicts));
    if !not_modelled.is_empty() {
        println!(
            "\nnot modelled (the lab's alone): {}",
            not_modelled.join(", ")
        );
    }
    let disagree = verdicts.iter().filter(|v| !v.agrees).count();
    println!(
        "\n{} cells checked in {:.1} s: {}",
        verdicts.len(),
        started.elapsed().as_secs_f64(),
        match disagree {
            0 => "every model agrees with its variant's claim".to_owned(),
            n => format!("{n} disagree with their variant's claim"),
        }
    );
    if let Some(dir) = &args.timelines {
        let written = write_timelines(dir, &verdicts)?;
        println!("drew {written} counterexamples into {}", dir.display());
    }
    if let Some(path) = &args.json {
        let json = serde_json::json!({ "cells": verdicts, "not_modelled": not_modelled });
        std::fs::write(path, serde_json::to_vec_pretty(&json)?)?;
        println!("wrote {}", path.display());
    }
    Ok(disagree == 0)
}

/// The cells asked for that the lab has and the checker does not model.
fn not_modelled(wanted: &dyn Fn(Variant, Scenario) -> bool) -> Vec<String> {
    let modelled = cells();
    let mut rest = Vec::new();
    for variant in Variant::ALL {
        let missing: Vec<&str> = Scenario::ALL
            .into_iter()
            .filter(|&s| s.claim(variant).applies() && wanted(variant, s))
            .filter(|&s| !modelled.contains(&(variant, s)))
            .map(Scenario::name)
            .collect();
        if !missing.is_empty() {
            rest.push(format!("{} ({})", variant.name(), missing.join(" ")));
        }
    }
    rest
}

/// The table: a line per cell, each counterexample's steps under it, then
/// the bounds of each scenario checked.
pub fn table(verdicts: &[Verdict]) -> String {
    let mut out = format!(
        "{:<15} {:<20} {:<10} {:<10} {:>7} {:>5}  result\n",
        "variant", "scenario", "claim", "model", "states", "ms"
    );
    for v in verdicts {
        let result = match v.broken {
            Some(property) => format!(
                "counterexample in {} steps (breaks \"{property}\")",
                v.trace.len()
            ),
            None => format!("no violation in {} states", v.states),
        };
        let mark = if v.agrees { "" } else { "  << DISAGREES" };
        out += &format!(
            "{:<15} {:<20} {:<10} {:<10} {:>7} {:>5}  {result}{mark}\n",
            v.variant, v.scenario, v.claim, v.model, v.states, v.millis
        );
        for (n, step) in v.trace.iter().enumerate() {
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
    let mut parts = vec![
        format!("{} buyers", b.buyers),
        format!("stock {}", b.stock),
        format!("lease {}", b.lease),
        format!("work {}", b.work),
        format!("up to tick {}", b.horizon),
    ];
    if b.one_process {
        parts.push("one process".to_owned());
    }
    if b.crashes > 0 {
        let at = if b.crash_only_in_work {
            "during the work"
        } else {
            "anywhere"
        };
        parts.push(format!("{} crash {at}", b.crashes));
    }
    if b.pauses > 0 {
        let ticks = if b.freeze == 0 { b.lease + 1 } else { b.freeze };
        let unit = if ticks == 1 { "tick" } else { "ticks" };
        parts.push(format!(
            "{} freeze of {ticks} {unit} before the write",
            b.pauses
        ));
    }
    if b.vanishes > 0 {
        parts.push(format!(
            "{} deletion of the lock while its holder works or is frozen",
            b.vanishes
        ));
    }
    if b.nodes > 0 {
        parts.push(format!(
            "{} Redlock nodes ({} down from the start)",
            b.nodes, b.nodes_down
        ));
    }
    if b.restarts > 0 {
        parts.push(format!(
            "up to {} nodes restarting empty while the holder is frozen",
            b.restarts
        ));
    }
    if b.failovers > 0 {
        parts.push(format!(
            "{} failover (replication held back, then the replica promoted under a holder)",
            b.failovers
        ));
    }
    if b.one_request {
        parts.push("every buyer a retry of one request id".to_owned());
    }
    if b.wait_replicas {
        parts.push("the holder WAITs for a replica after taking the lock".to_owned());
    }
    if b.skew > 0 {
        parts.push(format!("the last buyer's clock {} ticks ahead", b.skew));
    }
    parts.join(", ")
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
