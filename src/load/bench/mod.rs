//! `stocklock bench`: costs measured side by side in one run.
//!
//! Against a running stack, each row alternates its two sides `runs` times
//! and compares their medians, so a noisy machine slows both sides alike:
//!
//! 1. `generator-vs-oha`: our generator vs oha on `/healthz` (is the
//!    generator the bottleneck?);
//! 2. `lua-vs-healthz`: the `lua` variant vs `/healthz` through the same
//!    nginx (what a sale costs over a bare request);
//! 3. `lua-vs-bare`: the `lua` variant vs `GET /bench/bare`, one EVALSHA
//!    of a bare decrement and nothing else, through the same nginx (what a
//!    correct sale costs over the cheapest answer that makes one Redis
//!    round trip; skipped unless the stack was started with `--bench-bare`),
//!    and from the same rounds `lua-cpu-vs-bare` and
//!    `lua-batch-cpu-vs-bare`: the CPU per answer of the instances and
//!    Redis together, the figure the sale itself controls (`bare.rs`);
//! 4. `lua-batch-vs-healthz`: the `lua-batch` variant vs `/healthz`
//!    through the same nginx (what a sale sent in batches costs over a
//!    bare request);
//! 5. `lua-batch-vs-lua`: `lua-batch` vs `lua`, with each side's 99th
//!    percentile latency (what batching gains, and what its buyers wait);
//!    the two rows share their `lua-batch` runs, the sides of both taking
//!    turns at going first;
//! 6. `lua-batch-latency-c1`: the median latency of `lua-batch` vs `lua`
//!    with one request in flight (what a lone buyer pays for the queue);
//! 7. `timeline-cost`: `lua` vs `lua` on a SKU reset with its timeline
//!    off (what recording every critical section costs a sale);
//! 8. `sold-out-vs-healthz`: `lua` on a SKU with no stock, every answer
//!    409 sold out, vs `/healthz` (what the crowd costs once the sale is over);
//! 9. `watchdog-vs-handoff-ceiling`: the `watchdog` variant under many
//!    waiting clients vs the lock hand-off ceiling 1 / (4 × Redis round
//!    trip) measured in the same run;
//! 10. `redlock-vs-watchdog`: both with many waiting clients (what a lock
//!     on a majority of five servers costs over one Redis; skipped when
//!     the stack has no Redlock nodes);
//! 11. `orders-vs-sales`: the orders the pipeline writes per second
//!     against the sale rate of `lua-stream`, with the lag from sale to
//!     order row (skipped on a stack without orders; `orders.rs`);
//! 12. `pg-update-vs-lua` and `pg-update-many-skus`: `pg-update` vs `lua` on
//!     one hot SKU (with PostgreSQL's and Redis's CPU per answer), and over
//!     64 SKUs vs one (skipped without PostgreSQL; `pg.rs`).
//! 13. `pg-update-sync-off-vs-on`: `pg-update` on the hot SKU with the
//!     server's `synchronous_commit` off and on, switched live: what the
//!     WAL flush costs (skipped without `--postgres-url`; `pg_sync.rs`).
//! 14. `pg-batch-vs-update`: `pg-batch` vs `pg-update` on one hot SKU
//!     each, with PostgreSQL's CPU per sale and each statement's time per
//!     sale from `pg_stat_statements` (skipped without PostgreSQL;
//!     `pg_batch.rs`).
//!
//! `--crowd` plays instead every variant safe in the race at a small and
//! a large crowd of buyers (`crowd.rs`).
//!
//! The rows of requests per second through nginx are reported with no
//! goal (`bare::THROUGHPUT_UNJUDGED` says why); the cost rows are judged.
//!
//! Around each `lua` side (and each bare, `lua-batch` and `/healthz` side
//! of rows 3 to 5) it also measures where the time goes: what Redis
//! spent per sale (EVALSHA's `usec` over its `calls`, or over the answers,
//! in `INFO commandstats`, the counters read before and after the side) and each process's CPU share
//! (instances, nginx, Redis, the generator itself: [`cpu`]). Then the
//! resident memory of each instance. `--json FILE` writes all of it
//! ([`report`]).

mod bare;
mod batch;
mod classroom;
mod config;
pub mod cpu;
pub mod crowd;
mod crowd_figures;
mod orders;
mod pg;
mod pg_batch;
mod pg_figures;
mod pg_sync;
mod redis_info;
pub mod report;
mod rows;
mod runs;
mod side;
mod when;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use hyper::Method;

use self::cpu::{Usage, Watched};
use self::redis_info::BenchRedis;
use self::report::{BenchReport, RedisPerSale, Row};
pub use self::when::{machine, utc_now};
use super::engine::{self, Plan, Progress, Tally, Target};
use super::resolve_target;
use crate::client::StackClient;
use crate::os::find_program;

pub use config::{BenchConfig, RowName};

/// The SKUs the rows sell, each given its stock before the rows.
const LUA_SKU: &str = "bench-lua";
const BATCH_SKU: &str = "bench-lua-batch";
const UNTIMED_SKU: &str = "bench-lua-untimed";
const SOLD_OUT_SKU: &str = "bench-sold-out";
const WATCHDOG_SKU: &str = "bench-watchdog";
const REDLOCK_SKU: &str = "bench-redlock";

/// Stock a whole bench cannot sell out.
const PLENTY: i64 = 1_000_000_000;

/// A bench under way: the stack, its Redis, and what was measured so far.
struct Bench {
    config: BenchConfig,
    client: StackClient,
    target: Target,
    redis: BenchRedis,
    report: BenchReport,
}

/// Runs every row, prints each as it is done, and writes `--json`.
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
    let redis = BenchRedis::connect(&config.redis_url).await?;
    let report = BenchReport {
        date: utc_now(),
        machine: machine(),
        target: client.base().to_owned(),
        concurrency: config.concurrency,
        seconds_per_run: config.duration.as_secs_f64(),
        runs_per_side: config.runs,
        rows: Vec::new(),
        skipped: Vec::new(),
        redis_per_lua_sale: None,
        cpu_during_lua: None,
        lua_vs_bare: None,
        lua_batch: None,
        orders_vs_sales: None,
        postgres: None,
        crowd: config.crowd.then(|| crowd::CrowdReport {
            crowds: config.crowds.clone(),
            ..Default::default()
        }),
        instances: Vec::new(),
        throughput_not_judged: bare::THROUGHPUT_UNJUDGED.to_owned(),
    };
    println!("{}", report.header());
    if !config.crowd {
        println!("{}", report::table_head());
    }
    let mut bench = Bench {
        config,
        client,
        target,
        redis,
        report,
    };
    if bench.config.crowd {
        let crowd = bench.crowd().await?;
        bench.report.crowd = Some(crowd);
        return bench.write_json();
    }
    if bench.wants(RowName::GeneratorVsOha) {
        bench.generator_vs_oha().await?;
    }
    for (sku, stock) in [
        (LUA_SKU, PLENTY),
        (BATCH_SKU, PLENTY),
        (SOLD_OUT_SKU, 0),
        (WATCHDOG_SKU, PLENTY),
        (REDLOCK_SKU, PLENTY),
    ] {
        bench.client.reset(sku, stock, 0).await?;
    }
    bench
        .client
        .reset_as(&crate::wire::ResetRequest {
            sku: UNTIMED_SKU.to_owned(),
            stock: PLENTY,
            buckets: 0,
            timeline: Some(false),
        })
        .await?;
    if bench.wants(RowName::LuaVsHealthz) {
        bench.lua_vs_healthz().await?;
    }
    bench.against_bare().await?;
    bench.lua_batch().await?;
    if bench.wants(RowName::TimelineCost) {
        bench.timeline_cost().await?;
    }
    if bench.wants(RowName::SoldOutVsHealthz) {
        bench.sold_out_vs_healthz().await?;
    }
    if bench.wants(RowName::WatchdogVsHandoffCeiling) {
        bench.watchdog_vs_ceiling().await?;
    }
    if bench.wants(RowName::RedlockVsWatchdog) {
        bench.redlock_vs_watchdog().await?;
    }
    if bench.wants(RowName::OrdersVsSales) {
        bench.orders_vs_sales().await?;
    }
    if bench.wants(RowName::PgUpdateVsLua) || bench.wants(RowName::PgUpdateManySkus) {
        bench.pg_rows().await?;
    }
    if bench.wants(RowName::PgUpdateSyncOffVsOn) {
        bench.pg_sync_row().await?;
    }
    if bench.wants(RowName::PgBatchVsUpdate) {
        bench.pg_batch_row().await?;
    }
    if bench.wants(RowName::Classroom30Vs1) {
        bench.classroom().await?;
    }
    bench.memory().await?;
    println!("{}", bare::THROUGHPUT_UNJUDGED);
    bench.write_json()
}

impl Bench {
    /// Writes the report to `--json`'s file, if asked.
    fn write_json(&self) -> anyhow::Result<()> {
        if let Some(path) = &self.config.json {
            std::fs::write(path, serde_json::to_string_pretty(&self.report)?)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
        Ok(())
    }
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
        .kill_on_drop(true)
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
