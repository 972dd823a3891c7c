//! `stocklock load`: the load generator and its verdict.
//!
//! For each variant: reset its SKU (with `--stock`), read the ledger, fire
//! the load through [`engine`], read the ledger again, and judge. The
//! numbers that decide the verdict come from the ledger (`/api/state`), never
//! from what the client believes; the client's own count of 200s is compared
//! with the ledger's and any disagreement is flagged.
//!
//! - this module: what was asked ([`LoadConfig`], also the command line's
//!   flags), the runs ([`Runner`]), and the `--path` baseline;
//! - [`engine`]: the requests themselves, through `http1`, its own small
//!   HTTP/1.1 client;
//! - [`verdict`]: what the ledger says about a run, and whether that
//!   contradicts the variant's expectation;
//! - [`report`]: the table and lines printed;
//! - `progress`: the bar (or the lines) shown while a run is under way;
//! - [`mod@bench`]: `stocklock bench`.

pub mod bench;
pub mod engine;
mod history;
mod http1;
pub mod orders;
mod progress;
pub mod report;
mod runner;
pub mod verdict;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use hyper::Method;

use self::engine::{Plan, Progress, Target};
use self::progress::with_progress;
pub use self::runner::Runner;
pub use self::verdict::{Judgement, Verdict, contradiction, judge};
use crate::args::parse_duration;
use crate::history::Recorder;
use crate::knobs::{parse_buckets, parse_stock};
use crate::wire::{LoadReport, VariantInfo};

/// What `stocklock load` was asked for: its flags, and what the lab and
/// the dashboard's runs ask for (`..LoadConfig::new(..)`).
#[derive(Clone, Debug, clap::Args)]
#[command(after_help = "Example, the workshop's headline table:\n  \
    stocklock load --variant all --stock 50 --requests 400 --concurrency 64 --work-ms 2 --json out.json")]
pub struct LoadConfig {
    /// The stack to hit (normally nginx).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub target: String,
    /// One variant, a comma-separated list, or `all` (every variant in turn).
    #[arg(
        long = "variant",
        value_name = "VARIANT",
        default_value = "all",
        value_delimiter = ','
    )]
    pub variants: Vec<String>,
    /// SKU to sell (default: each variant's own name, so variants never share stock).
    #[arg(long)]
    pub sku: Option<String>,
    /// Put before each variant's name to name its SKU when `sku` is not
    /// given (a classroom seat's SKUs, `seat-ID-`); empty for the run's own.
    #[arg(skip)]
    pub sku_prefix: String,
    /// Reset the SKU to this stock before each run (needs the admin token).
    #[arg(long)]
    pub stock: Option<i64>,
    /// Admin token for --stock.
    #[arg(long, env = "STOCKLOCK_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Requests per variant (default 400 unless --duration is given).
    #[arg(long)]
    pub requests: Option<u64>,
    /// Run each variant this long instead (e.g. 10s, 500ms, 2m).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Requests in flight at once (closed loop: each worker sends its next
    /// request when the last one is answered).
    #[arg(long, short = 'c', default_value_t = 64)]
    pub concurrency: usize,
    /// Open loop: start this many requests per second whatever the answers
    /// (latency then counts from each request's slot).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Business time inside the critical section (passed as work_ms).
    #[arg(long)]
    pub work_ms: Option<u64>,
    /// Lock lease (passed as lease_ms).
    #[arg(long)]
    pub lease_ms: Option<u64>,
    /// How long to wait for the lock (passed as wait_ms).
    #[arg(long)]
    pub wait_ms: Option<u64>,
    /// After a Redis lock is taken, WAIT for this many replicas to have it
    /// (passed as replicas; the stack needs a replica: up --replica).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=5))]
    pub replicas: Option<u8>,
    /// Per-request timeout.
    #[arg(long, default_value = "150s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Load any path instead (e.g. /healthz, for a baseline): no reset, no
    /// ledger, no verdict; prints throughput, latency and statuses.
    #[arg(long, conflicts_with_all = ["sku", "stock", "json", "check", "history"])]
    pub path: Option<String>,
    /// Write every run as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Record what every request was told (JSON Lines, `stocklock history
    /// check`'s format) to this file, and judge each run's history with the
    /// history checker beside the ledger's verdict. With --check, the two
    /// judges disagreeing on safety, or a history not decided, fails.
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
    /// Exit with status 2 when an observed verdict contradicts the expected one.
    #[arg(long)]
    pub check: bool,
    /// What --check expects instead of each variant's own expectation from
    /// /api/variants: `safe` or `oversells`.
    #[arg(long, value_parser = ["safe", "oversells"])]
    pub expect: Option<String>,
    /// Spread each run over this many SKUs (SKU-0 ... SKU-n-1, each reset to
    /// --stock), one request in turn to each; on a Redis Cluster they spread
    /// over every master. The table shows the totals, and a line per
    /// variant says in how many SKUs it oversold.
    #[arg(
        long,
        default_value_t = 1,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000)
    )]
    pub skus: usize,
    /// Split each SKU's stock over this many buckets at reset (0-64; default:
    /// 8 for lua-sharded, one key for the rest).
    #[arg(long)]
    pub buckets: Option<u32>,
}

impl LoadConfig {
    /// A run on `target` with `stocklock load`'s defaults: every variant,
    /// 400 requests, 64 at a time, no knobs, no reset, one SKU per variant.
    /// Callers change what they need with `..LoadConfig::new(..)`.
    pub fn new(target: &str, admin_token: Option<String>) -> Self {
        Self {
            target: target.to_owned(),
            variants: vec!["all".to_owned()],
            sku: None,
            sku_prefix: String::new(),
            stock: None,
            admin_token,
            requests: None,
            duration: None,
            concurrency: 64,
            rate: None,
            work_ms: None,
            lease_ms: None,
            wait_ms: None,
            replicas: None,
            timeout: Duration::from_secs(150),
            path: None,
            json: None,
            history: None,
            check: false,
            expect: None,
            skus: 1,
            buckets: None,
        }
    }

    /// Requests per variant: `--requests`, or 400 unless a duration is given.
    pub fn planned_requests(&self) -> Option<u64> {
        self.requests.or(if self.duration.is_some() {
            None
        } else {
            Some(400)
        })
    }

    /// The engine's plan for `paths`, with this config's pace and bounds.
    fn plan(&self, paths: Vec<String>, history: Option<Recorder>) -> Plan {
        Plan {
            method: Method::GET,
            paths,
            concurrency: self.concurrency,
            requests: self.planned_requests(),
            duration: self.duration,
            rate: self.rate,
            timeout: self.timeout,
            history,
        }
    }
}

/// Runs the whole command: every variant in turn, a table, JSON, `--check`;
/// or, with `--path`, the baseline. `Ok(false)`: `--check` found a contradiction.
pub async fn run(config: LoadConfig) -> anyhow::Result<bool> {
    if let Some(path) = &config.path {
        return run_path(path, &config).await.map(|()| true);
    }
    config.stock.map(parse_stock).transpose()?;
    config.buckets.map(parse_buckets).transpose()?;
    if config.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    let runner = Runner::connect(config.clone()).await?;
    let known = runner.client().variants().await?;
    let variants: Vec<&VariantInfo> = if config.variants.iter().any(|v| v == "all") {
        known.iter().collect()
    } else {
        config
            .variants
            .iter()
            .map(|name| {
                known.iter().find(|v| &v.name == name).with_context(|| {
                    let names: Vec<&str> = known.iter().map(|v| v.name.as_str()).collect();
                    format!("no variant {name:?}; valid: {}, or all", names.join(", "))
                })
            })
            .collect::<anyhow::Result<_>>()?
    };
    if variants.len() > 1 && config.sku.is_some() && config.stock.is_none() {
        eprintln!(
            "note: every variant runs on the same SKU without a reset in between (--stock resets it)"
        );
    }

    let mut reports = Vec::new();
    for info in variants {
        let progress = Progress::default();
        let work = runner.run_variant(info, &progress);
        let report = with_progress(&info.name, config.planned_requests(), &progress, work).await?;
        reports.push(report);
    }
    report::print_table(&reports);
    if let Some(path) = &config.json {
        let report = LoadReport {
            runs: reports.clone(),
        };
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    for report in &reports {
        if let Some(orders) = &report.orders {
            let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1}"));
            println!(
                "orders {}: {} orders, lag p50 {} ms p99 {} ms, {} orders/s; reconcile: {}",
                report.variant,
                orders.orders,
                ms(orders.lag_p50_ms),
                ms(orders.lag_p99_ms),
                orders
                    .orders_per_s
                    .map_or("-".to_owned(), |v| format!("{v:.0}")),
                orders.verdict
            );
        }
    }
    if let (Some(path), Some(recorder)) = (&config.history, runner.recorder()) {
        recorder
            .write(path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!(
            "wrote {} (check it again: stocklock history check {})",
            path.display(),
            path.display()
        );
        for report in &reports {
            if let Some(h) = &report.history {
                println!(
                    "history {}: {} ({} operations, {} ms){}",
                    report.variant,
                    h.verdict,
                    h.ops,
                    h.elapsed_ms,
                    if h.verdict == "linearizable" {
                        String::new()
                    } else {
                        format!(": {}", h.why)
                    }
                );
            }
        }
    }
    let mut ok = true;
    for report in &reports {
        if let Some(why) = &report.disagreement {
            eprintln!("DISAGREEMENT {}: {why}", report.variant);
        }
        if let Some(why) = &report.contradiction {
            eprintln!("CONTRADICTION {}: {why}", report.variant);
            ok = false;
        }
    }
    Ok(!config.check || ok)
}

/// Loads one path with no verdict: a baseline (`--path /healthz`), paced
/// and bounded as `config` says.
async fn run_path(path: &str, config: &LoadConfig) -> anyhow::Result<()> {
    if !path.starts_with('/') {
        bail!("--path must start with '/', got {path:?}");
    }
    // The engine sends the plan's paths as they are: refuse here what
    // would break its request line.
    http1::Prepared::new(&Method::GET, path, "check")
        .map_err(|err| anyhow::anyhow!("--path: {err}"))?;
    if config.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    let target = resolve_target(&config.target).await?;
    let plan = config.plan(vec![path.to_owned()], None);
    let progress = Progress::default();
    let tally = with_progress(
        path,
        plan.requests,
        &progress,
        engine::run(&target, &plan, &progress),
    )
    .await;
    report::print_path_line(path, &tally);
    if tally.requests > 0 && tally.errors.connect == tally.requests {
        bail!(
            "{}: cannot connect (is the stack up? ./scripts/up.sh)",
            config.target
        );
    }
    Ok(())
}

/// Resolves `http://host:port` into an address and a Host header.
pub async fn resolve_target(url: &str) -> anyhow::Result<Target> {
    let uri: hyper::Uri = url
        .parse()
        .with_context(|| format!("--target {url:?} is not a URL"))?;
    if uri.scheme_str() != Some("http") {
        bail!("--target must be an http:// URL, got {url:?}");
    }
    let authority = uri.authority().context("--target has no host")?.clone();
    let port = authority.port_u16().unwrap_or(80);
    let addr: SocketAddr = tokio::net::lookup_host((authority.host(), port))
        .await
        .with_context(|| format!("cannot resolve {}", authority.host()))?
        .next()
        .with_context(|| format!("{} resolves to no address", authority.host()))?;
    Ok(Target {
        addr,
        authority: authority.to_string(),
    })
}
