//! `stocklock soak`'s command line: its arguments, their defaults, and
//! the command that plays the same schedule again.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::faults::Kind;
use crate::harness::TargetArgs;
use crate::variants::Variant;

/// `--buyers` and `--stock` unless told (the rerun line names others).
const BUYERS: usize = 2;
const STOCK: i64 = 40;

#[derive(Args, Debug)]
pub struct SoakArgs {
    /// Minutes of faults under load (then the faults stop, every variant
    /// must sell again, and the whole history is judged).
    #[arg(long, default_value_t = 5.0)]
    pub minutes: f64,
    /// Draws the fault schedule: the same seed plays the same faults at
    /// the same moments.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The fault kinds to draw from, comma-separated (default: every kind
    /// the stack can take): pause-holder, crash-after-acquire,
    /// crash-after-write, lock-vanishes, crash, crash-before-enqueue,
    /// worker-crash-before-ack, pause-redis, restart-redis, clock-skew,
    /// kill-instance, stop-instance, kill-redlock-node, stop-redlock-node,
    /// kill-etcd, stop-etcd, kill-zookeeper, stop-zookeeper,
    /// kill-postgres, stop-postgres, partition.
    #[arg(long, value_delimiter = ',', value_parser = parse_kind)]
    pub faults: Vec<Kind>,
    /// Strike the kinds in turn, one every 4 s, in the order given (so
    /// each strikes), instead of drawing them.
    #[arg(long)]
    pub cycle: bool,
    /// Only these variants (comma-separated; default: all).
    #[arg(long, value_delimiter = ',', value_parser = crate::args::parse_variant)]
    pub variant: Vec<Variant>,
    /// Buyers per variant, each one request at a time.
    #[arg(long, default_value_t = BUYERS)]
    pub buyers: usize,
    /// Units of each round's SKU.
    #[arg(long, default_value_t = STOCK)]
    pub stock: i64,
    /// Run the stack's Redis without --persist: a Redis restart then loses
    /// the ledger, judged per round as LEDGER_LOST, never as a violation.
    #[arg(long)]
    pub no_persist: bool,
    /// How long each order variant's reservation waits to be paid before
    /// it expires and its unit goes back to the stock (the stack's
    /// `--pay-within`; default: the stack's own, 15 min). A round judged
    /// after its reservations expired counts their units back. Not with
    /// --target (the stack was started with its own).
    #[arg(long, value_parser = crate::args::parse_duration, conflicts_with = "target")]
    pub pay_within: Option<Duration>,
    /// Also write the report as JSON (and each violation's timeline as a
    /// self-contained HTML file beside it).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write every round's history (JSON Lines, what its buyers were
    /// told, its SKU named `VARIANT/SKU`) here, as `stocklock history
    /// check` reads it.
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
    /// Show the stack's own output.
    #[arg(long)]
    pub echo: bool,
    #[command(flatten)]
    pub target: TargetArgs,
}

fn parse_kind(name: &str) -> Result<Kind, String> {
    Kind::parse(name).ok_or_else(|| {
        let names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
        format!("no fault kind {name:?}; the kinds: {}", names.join(", "))
    })
}

/// The command that plays the same schedule again.
pub(super) fn rerun_line(args: &SoakArgs) -> String {
    let mut line = format!(
        "stocklock soak --minutes {} --seed {}",
        args.minutes, args.seed
    );
    if !args.faults.is_empty() {
        let names: Vec<&str> = args.faults.iter().map(|k| k.name()).collect();
        line.push_str(&format!(" --faults {}", names.join(",")));
    }
    if args.cycle {
        line.push_str(" --cycle");
    }
    if !args.variant.is_empty() {
        let names: Vec<&str> = args.variant.iter().map(|v| v.name()).collect();
        line.push_str(&format!(" --variant {}", names.join(",")));
    }
    if args.buyers != BUYERS || args.stock != STOCK {
        line.push_str(&format!(" --buyers {} --stock {}", args.buyers, args.stock));
    }
    if args.no_persist {
        line.push_str(" --no-persist");
    }
    if let Some(within) = args.pay_within {
        line.push_str(&format!(" --pay-within {}ms", within.as_millis()));
    }
    line
}
