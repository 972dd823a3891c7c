//! `stocklock bench`: costs measured side by side in one run.
//!
//! Against a running stack, each row alternates its two sides `runs` times
//! and compares their medians, so a noisy machine slows both sides alike:
//!
//! 1. our generator vs oha on `/healthz` (is the generator the bottleneck?);
//! 2. the `lua` variant vs `/healthz` through the same nginx (what a sale
//!    costs over a bare request);
//! 3. the `watchdog` variant under many waiting clients vs the lock
//!    hand-off ceiling 1 / (4 × Redis round trip) measured in the same run;
//! 4. the `redlock` variant vs `watchdog`, both with many waiting clients
//!    (what a lock on a majority of five servers costs over one Redis;
//!    skipped when the stack has no Redlock nodes);
//!
//! and then the resident memory of each instance.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hyper::Method;

use super::engine::{self, Plan, Progress, Target};
use super::resolve_target;
use crate::args::parse_duration;
use crate::client::StackClient;
use crate::os::find_program;
use crate::store::Store;

/// What `stocklock bench` was asked for: its flags.
#[derive(Clone, Debug, clap::Args)]
pub struct BenchConfig {
    /// The stack to measure (normally nginx).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub target: String,
    /// The stack's Redis, for the round-trip time (stocklock up prints it).
    #[arg(long, env = "STOCKLOCK_REDIS_URL")]
    pub redis_url: String,
    /// Admin token, to give the bench SKUs their stock.
    #[arg(long, env = "STOCKLOCK_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Runs per side of each row; the medians are compared.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    #[arg(long, short = 'c', default_value_t = 64)]
    pub concurrency: usize,
    /// Length of each run.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub duration: Duration,
}

/// The median of some measurements.
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn fmt_runs(values: &[f64]) -> String {
    let shown: Vec<String> = values.iter().map(|v| format!("{v:.0}")).collect();
    shown.join(", ")
}

/// Requests per second of our engine on `path` for the configured duration.
async fn ours(target: &Target, path: &str, config: &BenchConfig) -> anyhow::Result<f64> {
    let plan = Plan {
        method: Method::GET,
        paths: vec![path.to_owned()],
        concurrency: config.concurrency,
        requests: None,
        duration: Some(config.duration),
        rate: None,
        timeout: Duration::from_secs(30),
    };
    let tally = engine::run(target, &plan, &Progress::default()).await;
    let failed = tally.errors.total();
    if failed > 0 {
        bail!(
            "{failed} of {} requests to {path} failed: {:?}",
            tally.requests,
            tally.errors
        );
    }
    Ok(tally.rps())
}

/// Requests per second of oha on `url`, same concurrency and duration.
async fn oha(oha: &std::path::Path, url: &str, config: &BenchConfig) -> anyhow::Result<f64> {
    let output = tokio::process::Command::new(oha)
        .args(["--no-tui", "--output-format", "json", "-c"])
        .arg(config.concurrency.to_string())
        .arg("-z")
        .arg(format!("{}ms", config.duration.as_millis()))
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .await
        .context("cannot run oha")?;
    if !output.status.success() {
        bail!("oha failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).context("oha's JSON")?;
    report["summary"]["requestsPerSec"]
        .as_f64()
        .context("oha's JSON has no summary.requestsPerSec")
}

/// Median of `samples` sequential PINGs, in seconds.
async fn redis_round_trip(redis_url: &str, samples: usize) -> anyhow::Result<f64> {
    let store = Store::open(redis_url)?;
    let mut conn = store
        .conn()
        .await
        .with_context(|| format!("cannot reach Redis at {redis_url}"))?;
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        let started = Instant::now();
        let _: String = redis::cmd("PING").query_async(&mut conn).await?;
        times.push(started.elapsed().as_secs_f64());
    }
    Ok(median(&mut times))
}

/// The instances behind the target, found by asking `/healthz` until every
/// one has answered (nginx takes turns), with their resident memory.
async fn instance_memory(
    client: &StackClient,
) -> anyhow::Result<BTreeMap<String, (u32, Option<u64>)>> {
    let mut seen = BTreeMap::new();
    for _ in 0..32 {
        let health = client.health().await?;
        seen.entry(health.instance).or_insert((health.pid, None));
    }
    for (pid, rss) in seen.values_mut() {
        *rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find_map(|line| line.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            });
    }
    Ok(seen)
}

/// Runs every row and prints it.
pub async fn run(config: BenchConfig) -> anyhow::Result<()> {
    if config.runs == 0 || config.concurrency == 0 {
        bail!("--runs and --concurrency must be at least 1");
    }
    let client = StackClient::new(
        &config.target,
        config.admin_token.clone(),
        Duration::from_secs(10),
    )?;
    let target = resolve_target(&config.target).await?;
    let base = client.base();
    println!(
        "stocklock bench: {base}, concurrency {}, {:?} per run, medians of {} runs (each row alternates its sides)",
        config.concurrency, config.duration, config.runs
    );

    // 1. Our generator vs oha.
    match find_program("oha") {
        None => println!("generator vs oha: skipped, oha is not installed (cargo install oha)"),
        Some(oha_bin) => {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for _ in 0..config.runs {
                a.push(ours(&target, "/healthz", &config).await?);
                b.push(oha(&oha_bin, &format!("{base}/healthz"), &config).await?);
            }
            println!(
                "generator vs oha, /healthz:        stocklock {:>8.0} req/s  oha {:>8.0} req/s  ratio {:.2}   (runs: {} | {})",
                median(&mut a.clone()),
                median(&mut b.clone()),
                median(&mut a.clone()) / median(&mut b.clone()),
                fmt_runs(&a),
                fmt_runs(&b)
            );
        }
    }

    // The variants need stock that a whole run cannot exhaust.
    for sku in ["bench-lua", "bench-watchdog", "bench-redlock"] {
        client.reset(sku, 1_000_000_000, 0).await?;
    }

    // 2. lua vs /healthz through the same nginx.
    let (mut sale, mut bare) = (Vec::new(), Vec::new());
    for _ in 0..config.runs {
        sale.push(ours(&target, "/deductStock/lua?sku=bench-lua", &config).await?);
        bare.push(ours(&target, "/healthz", &config).await?);
    }
    println!(
        "lua vs /healthz through nginx:     lua {:>8.0} req/s  healthz {:>8.0} req/s  ratio {:.2}   (runs: {} | {})",
        median(&mut sale.clone()),
        median(&mut bare.clone()),
        median(&mut sale.clone()) / median(&mut bare.clone()),
        fmt_runs(&sale),
        fmt_runs(&bare)
    );

    // 3. watchdog hand-offs vs 1 / (4 × RTT).
    let (mut locked, mut ceilings, mut rtts) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..config.runs {
        let rtt = redis_round_trip(&config.redis_url, 2000).await?;
        rtts.push(rtt * 1e6);
        ceilings.push(1.0 / (4.0 * rtt));
        locked.push(
            ours(
                &target,
                "/deductStock/watchdog?sku=bench-watchdog&wait_ms=60000",
                &config,
            )
            .await?,
        );
    }
    println!(
        "watchdog vs hand-off ceiling:      watchdog {:>8.0} req/s  1/(4*RTT) {:>8.0} req/s  ratio {:.2}   (RTT median {:.0} us; runs: {} | {})",
        median(&mut locked.clone()),
        median(&mut ceilings.clone()),
        median(&mut locked.clone()) / median(&mut ceilings.clone()),
        median(&mut rtts.clone()),
        fmt_runs(&locked),
        fmt_runs(&ceilings)
    );

    // 4. redlock vs watchdog, many waiting clients each.
    // No answer, or 503 not_configured: no Redlock nodes.
    let probe = client
        .deduct("/deductStock/redlock?sku=bench-redlock")
        .await;
    let configured = !matches!(probe.status, 0 | 503);
    if configured {
        let (mut majority, mut one) = (Vec::new(), Vec::new());
        for _ in 0..config.runs {
            majority.push(
                ours(
                    &target,
                    "/deductStock/redlock?sku=bench-redlock&wait_ms=60000",
                    &config,
                )
                .await?,
            );
            one.push(
                ours(
                    &target,
                    "/deductStock/watchdog?sku=bench-watchdog&wait_ms=60000",
                    &config,
                )
                .await?,
            );
        }
        println!(
            "redlock vs watchdog:               redlock {:>8.0} req/s  watchdog {:>8.0} req/s  ratio {:.2}   (runs: {} | {})",
            median(&mut majority.clone()),
            median(&mut one.clone()),
            median(&mut majority.clone()) / median(&mut one.clone()),
            fmt_runs(&majority),
            fmt_runs(&one)
        );
    } else {
        println!("redlock vs watchdog: skipped, the stack has no Redlock nodes (up --redlock 5)");
    }

    // 5. Memory of each instance after all that.
    for (instance, (pid, rss)) in instance_memory(&client).await? {
        match rss {
            Some(kb) => println!(
                "instance {instance} (pid {pid}): resident memory {:.1} MiB",
                kb as f64 / 1024.0
            ),
            None => println!(
                "instance {instance} (pid {pid}): resident memory unknown (not on this machine?)"
            ),
        }
    }
    Ok(())
}
