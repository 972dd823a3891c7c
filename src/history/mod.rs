//! `stocklock history check`: the independent judge. Every live run records
//! what its clients were told ([`record`]); this decides, per SKU, whether
//! those answers fit one sequential spec of a stock (`spec`), knowing
//! nothing of variants, locks, claims or models.
//!
//! As Porcupine does it: a model of a few small functions (`spec`), a
//! history split into independent parts (one per SKU), Wing & Gong's search
//! with Lowe's memoisation (`search`), and the operations that cannot be
//! ordered drawn when it fails ([`picture`]).
//!
//! - [`op`]: the JSON Lines format and its parser;
//! - [`record`]: the recorder the clients write through;
//! - `spec`: the stock, and what each step does to it;
//! - `steps`: from operations to steps (a request id's attempts are one);
//! - `search`: is there an order?
//! - [`judge`]: the verdict of a SKU and its smallest failing set;
//! - [`picture`]: the HTML of the failed SKUs.

pub mod judge;
pub mod op;
pub mod picture;
pub mod record;
mod search;
mod spec;
mod steps;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

pub use self::judge::{Decision, Verdict};
pub use self::op::{BadLine, Op, Outcome, SkuHistory};
pub use self::record::{Recorder, Told};

/// `stocklock history ...`
#[derive(Debug, clap::Subcommand)]
pub enum HistoryCommand {
    /// Decide every SKU of a recorded history: linearizable (exit 0), not
    /// linearizable, a buyer told "sold out" while stock remained (exit 3),
    /// unsafe (exit 2), undecided in time (exit 4); bad input exits 1.
    #[command(
        after_help = "The file is JSON Lines: a SKU's declaration before its operations,\n  \
        {\"sku\":\"a\",\"initial\":3}\n  \
        {\"sku\":\"a\",\"client\":7,\"id\":\"r1\",\"call\":100,\"ret\":250,\"outcome\":\"sold\",\"unit\":3}\n\
        outcome is sold (+unit), sold_out, busy, unknown, returned (+unit) or read (+remaining);\n\
        id may be absent; ret is absent when no answer came; times are ns on one clock.\n\
        load, lab, explore, replay and soak write it with --history FILE."
    )]
    Check(CheckArgs),
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The history (JSON Lines).
    pub file: PathBuf,
    /// Also write the verdicts as JSON here; the picture of any SKU that
    /// fails goes beside it (the same name, `.html`).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Time for each SKU, in seconds: when it runs out, the SKU is
    /// `undecided`, which fails.
    #[arg(long, default_value_t = 30.0)]
    pub timeout_s: f64,
}

/// The verdicts of a whole history.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub skus: Vec<Decision>,
    pub elapsed_ms: u64,
}

impl Report {
    /// The worst verdict of any SKU (linearizable for none).
    pub fn worst(&self) -> Verdict {
        self.skus
            .iter()
            .map(|d| d.verdict)
            .max()
            .unwrap_or(Verdict::Linearizable)
    }

    /// Why the history is as bad as it is: the first SKU with the worst
    /// verdict's reason (empty when there is no SKU).
    pub fn worst_why(&self) -> String {
        self.worst_why_said().en
    }

    /// [`Report::worst_why`] in both languages.
    pub fn worst_why_said(&self) -> crate::wire::Said {
        let worst = self.worst();
        (self.skus.iter())
            .find(|d| d.verdict == worst)
            .map_or_else(Default::default, |d| crate::wire::Said {
                en: d.why.clone(),
                zh: d.why_zh.clone(),
            })
    }

    /// The exit status `history check` documents.
    pub fn exit_code(&self) -> u8 {
        match self.worst() {
            Verdict::Linearizable => 0,
            Verdict::NotLinearizable => 3,
            Verdict::Unsafe => 2,
            Verdict::Undecided => 4,
        }
    }

    /// One SKU's decision.
    pub fn sku(&self, sku: &str) -> Option<&Decision> {
        self.skus.iter().find(|d| d.sku == sku)
    }
}

/// Decides every SKU of `histories`, each within `per_sku`.
pub fn check(histories: &[SkuHistory], per_sku: Duration) -> Report {
    let started = Instant::now();
    let skus = histories
        .iter()
        .map(|h| judge::decide(h, per_sku))
        .collect();
    Report {
        skus,
        elapsed_ms: started.elapsed().as_millis() as u64,
    }
}

/// The HTML beside `json` (its name with `.html`).
pub fn picture_path(json: &Path) -> PathBuf {
    json.with_extension("html")
}

/// Writes the picture of `report`'s failed SKUs to `path`.
pub fn write_picture(histories: &[SkuHistory], report: &Report, path: &Path) -> anyhow::Result<()> {
    let pairs: Vec<(SkuHistory, Decision)> = histories
        .iter()
        .cloned()
        .zip(report.skus.iter().cloned())
        .collect();
    std::fs::write(path, picture::page(&pairs))
        .with_context(|| format!("writing {}", path.display()))
}

/// `stocklock history ...`: its exit status.
pub fn main(command: HistoryCommand) -> ExitCode {
    let HistoryCommand::Check(args) = command;
    match run_check(&args) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run_check(args: &CheckArgs) -> anyhow::Result<u8> {
    if !(args.timeout_s > 0.0 && args.timeout_s.is_finite()) {
        anyhow::bail!("--timeout-s must be a positive number of seconds");
    }
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?;
    let histories =
        op::parse(&text).with_context(|| format!("{} is not a history", args.file.display()))?;
    let report = check(&histories, Duration::from_secs_f64(args.timeout_s));
    for d in &report.skus {
        println!(
            "{:<24} {:>7} ops  {:<16} {}",
            d.sku,
            d.ops,
            d.verdict.as_str(),
            d.why
        );
    }
    println!(
        "{} SKUs, {} operations, decided in {} ms",
        report.skus.len(),
        report.skus.iter().map(|d| d.ops).sum::<usize>(),
        report.elapsed_ms
    );
    if let Some(json) = &args.json {
        let body = serde_json::to_string_pretty(&report)?;
        std::fs::write(json, body).with_context(|| format!("writing {}", json.display()))?;
    }
    if report.worst() != Verdict::Linearizable {
        let html = picture_path(args.json.as_deref().unwrap_or(&args.file));
        write_picture(&histories, &report, &html)?;
        println!("picture of what cannot be ordered: {}", html.display());
    }
    Ok(report.exit_code())
}
