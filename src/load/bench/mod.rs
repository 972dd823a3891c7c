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
pub mod cpu;
mod orders;
mod pg;
mod pg_figures;
mod redis_info;
pub mod report;
mod rows;
mod side;
mod when;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hyper::Method;

use self::cpu::{Kind, Usage, Watched};
use self::redis_info::BenchRedis;
use self::report::{BenchReport, InstanceMemory, RedisPerSale, Row, Skipped};
pub use self::when::{machine, utc_now};
use super::engine::{self, Plan, Progress, Tally, Target};
use super::resolve_target;
use crate::args::parse_duration;
use crate::client::StackClient;
use crate::os::find_program;

/// What `stocklock bench` was asked for: its flags.
#[derive(Clone, Debug, clap::Args)]
#[command(
    after_help = "Example (docs/measurements.md lists the runs actually made and their commands):\n  \
    stocklock bench --redis-url URL --admin-token TOKEN --runs 5 --duration 4s --json bench.json"
)]
pub struct BenchConfig {
    /// The stack to measure (normally nginx).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub target: String,
    /// The stack's Redis, for the round-trip time, its pid and its command
    /// statistics (stocklock up prints it).
    #[arg(long, env = "STOCKLOCK_REDIS_URL")]
    pub redis_url: String,
    /// Admin token, to give the bench SKUs their stock.
    #[arg(long, env = "STOCKLOCK_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Runs per side of each row; the medians are compared.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Requests in flight at once in every run, ours and oha's alike.
    #[arg(long, short = 'c', default_value_t = 64)]
    pub concurrency: usize,
    /// Length of each run.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Also write every row, the Redis time per sale, the CPU shares and
    /// the memory as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// The stack's PostgreSQL (stocklock up prints it), to count its CPU
    /// per answer in the pg-update rows; without it they show rates only.
    #[arg(long, env = "STOCKLOCK_POSTGRES_URL", hide_env_values = true)]
    pub postgres_url: Option<String>,
    /// Only these rows (comma-separated), e.g. `--rows timeline-cost --runs 15`
    /// to measure one small difference with many more runs. Default: all.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub rows: Vec<RowName>,
}

/// The bench's rows, by the names its table prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RowName {
    GeneratorVsOha,
    LuaVsHealthz,
    LuaVsBare,
    LuaCpuVsBare,
    LuaBatchCpuVsBare,
    LuaBatchVsHealthz,
    LuaBatchVsLua,
    LuaBatchLatencyC1,
    TimelineCost,
    SoldOutVsHealthz,
    WatchdogVsHandoffCeiling,
    RedlockVsWatchdog,
    OrdersVsSales,
    PgUpdateVsLua,
    PgUpdateManySkus,
}

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
        instances: Vec::new(),
        throughput_not_judged: bare::THROUGHPUT_UNJUDGED.to_owned(),
    };
    println!("{}", report.header());
    println!("{}", report::table_head());
    let mut bench = Bench {
        config,
        client,
        target,
        redis,
        report,
    };
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
    bench.memory().await?;
    println!("{}", bare::THROUGHPUT_UNJUDGED);

    if let Some(path) = &bench.config.json {
        std::fs::write(path, serde_json::to_string_pretty(&bench.report)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

impl Bench {
    /// One run of our engine on `path`; every request must be answered.
    async fn ours(&self, path: &str) -> anyhow::Result<Tally> {
        self.ours_at(path, self.config.concurrency).await
    }

    /// [`ours`](Self::ours) with `concurrency` requests in flight.
    async fn ours_at(&self, path: &str, concurrency: usize) -> anyhow::Result<Tally> {
        let plan = Plan {
            method: Method::GET,
            paths: vec![path.to_owned()],
            concurrency,
            requests: None,
            duration: Some(self.config.duration),
            rate: None,
            timeout: Duration::from_secs(30),
            history: None,
        };
        let tally = engine::run(&self.target, &plan, &Progress::default()).await;
        let failed = tally.errors.total();
        if failed > 0 {
            bail!(
                "{failed} of {} requests to {path} failed: {:?}",
                tally.requests,
                tally.errors
            );
        }
        Ok(tally)
    }

    async fn rps(&self, path: &str) -> anyhow::Result<f64> {
        Ok(self.ours(path).await?.rps())
    }

    /// One run of our engine on `path`, its CPU added to `usage`.
    async fn measured(
        &self,
        path: &str,
        watched: &Watched,
        usage: &mut Usage,
    ) -> anyhow::Result<Tally> {
        let before = cpu::sample(watched);
        let started = Instant::now();
        let tally = self.ours(path).await?;
        usage.add(
            &before,
            &cpu::sample(watched),
            started.elapsed().as_secs_f64(),
            tally.requests,
        );
        Ok(tally)
    }

    /// Whether `--rows` asks for this row (no `--rows`: every row).
    fn wants(&self, row: RowName) -> bool {
        self.config.rows.is_empty() || self.config.rows.contains(&row)
    }

    fn add(&mut self, row: Row) {
        println!("{}", row.line());
        self.report.rows.push(row);
    }

    fn skip(&mut self, row: &str, why: &str) {
        println!("{row}: skipped, {why}");
        self.report.skipped.push(Skipped {
            row: row.to_owned(),
            why: why.to_owned(),
        });
    }

    /// The processes whose CPU is watched: the instances (their pids from
    /// `/healthz`), whatever listens on the target (nginx's master and
    /// workers), Redis (its own pid) and this process. Only processes that
    /// run on this machine count.
    async fn watched(&mut self) -> anyhow::Result<Watched> {
        let instances: Vec<u32> = self
            .instances()
            .await?
            .into_values()
            .filter(|&pid| cpu::runs_here(pid, "stocklock"))
            .collect();
        let me = std::process::id();
        let front = cpu::listeners(self.target.addr)
            .into_iter()
            .filter(|pid| *pid != me && !instances.contains(pid))
            .collect();
        let redis = self
            .redis
            .pid()
            .await?
            .filter(|&pid| cpu::runs_here(pid, "redis-server"));
        Ok(Watched(BTreeMap::from([
            (Kind::Instances, instances),
            (Kind::Nginx, front),
            (Kind::Redis, redis.into_iter().collect()),
            (Kind::Generator, vec![me]),
        ])))
    }

    /// The instances behind the target and their pids, found by asking
    /// `/healthz` until every one has answered (nginx takes turns).
    async fn instances(&self) -> anyhow::Result<BTreeMap<String, u32>> {
        let mut seen = BTreeMap::new();
        for _ in 0..32 {
            let health = self.client.health().await?;
            seen.insert(health.instance, health.pid);
        }
        Ok(seen)
    }

    /// The resident memory of each instance after all the rows.
    async fn memory(&mut self) -> anyhow::Result<()> {
        for (instance, pid) in self.instances().await? {
            let resident_mib = cpu::runs_here(pid, "stocklock")
                .then(|| resident_kib(pid))
                .flatten()
                .map(|kib| kib as f64 / 1024.0);
            match resident_mib {
                Some(mib) => {
                    println!("instance {instance} (pid {pid}): resident memory {mib:.1} MiB")
                }
                None => println!(
                    "instance {instance} (pid {pid}): resident memory unknown (not on this machine?)"
                ),
            }
            self.report.instances.push(InstanceMemory {
                instance,
                pid,
                resident_mib,
            });
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

/// `VmRSS` of a process, in KiB.
fn resident_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
