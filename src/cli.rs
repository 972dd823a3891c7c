//! The command line: `stocklock serve` and `stocklock up`.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::args::{generate_token, parse_duration, parse_variant};
use crate::load::LoadConfig;
use crate::server::{Application, ServeConfig};
use crate::telemetry;
use crate::up::{self, UpConfig};
use crate::variants::Variant;

#[derive(Parser, Debug)]
#[command(
    name = "stocklock",
    version,
    about = "A flash-sale stock protection lab: the same sale behind no lock, a process mutex, \
             SETNX, SETNX with an expiry, a token lock, a watchdog lock, a fenced lock, or one Lua \
             script, on real Redis behind real nginx.",
    long_about = None
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run one instance: the HTTP API on one port, against one Redis.
    Serve(ServeArgs),
    /// Run the whole stack on this machine: redis-server, N instances and
    /// nginx in front, supervised until Ctrl-C.
    Up(UpConfig),
    /// Hammer /deductStock/{variant} on a running stack and judge the result
    /// from its ledger: SAFE, OVERSOLD n, DUPLICATES n or STUCK.
    Load(LoadArgs),
    /// Measure costs side by side on a running stack: our generator vs oha,
    /// lua vs /healthz, watchdog vs the lock hand-off ceiling, memory.
    Bench(BenchArgs),
    /// Run the failure scenarios end to end on a stack of its own and print
    /// the teaching matrix: expected vs observed, with the evidence.
    Lab(LabArgs),
    /// (internal) Wake a frozen process: SIGCONT to PID after a delay. Chaos
    /// mode's pause starts it before freezing itself.
    #[command(hide = true)]
    Resume {
        #[arg(long)]
        pid: u32,
        #[arg(long)]
        after_ms: u64,
    },
}

#[derive(Args, Debug)]
pub struct LabArgs {
    /// Scenarios to run (default: all). Each runs against every variant
    /// that claims something of it.
    #[arg(value_name = "SCENARIO", value_enum)]
    pub scenarios: Vec<crate::lab::Scenario>,
    /// Only these variants (repeat or comma-separate; default: all).
    #[arg(long, value_delimiter = ',')]
    pub variant: Vec<String>,
    /// Write every cell as JSON: {"cells":[{scenario, variant, expected, observed, pass, evidence}]}.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// Use this running stack (nginx URL) instead of starting one. It must
    /// run `stocklock up --chaos` with two instances (clock-skew sets
    /// instance b's clock itself); needs --admin-token and --redis-url;
    /// redis-restart is skipped.
    #[arg(long, requires_all = ["admin_token", "redis_url"])]
    pub target: Option<String>,
    #[arg(long, env = "STOCKLOCK_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// The target stack's Redis (stocklock up prints it).
    #[arg(long)]
    pub redis_url: Option<String>,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
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
    pub duration: std::time::Duration,
}

#[derive(Args, Debug)]
#[command(after_help = "Example, the workshop's headline table:\n  \
    stocklock load --variant all --stock 50 --requests 400 --concurrency 64 --work-ms 2 --json out.json")]
pub struct LoadArgs {
    /// The stack to hit (normally nginx).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub target: String,
    /// One variant, a comma-separated list, or `all` (every variant in turn).
    #[arg(long, default_value = "all", value_delimiter = ',')]
    pub variant: Vec<String>,
    /// SKU to sell (default: each variant's own name, so variants never share stock).
    #[arg(long)]
    pub sku: Option<String>,
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
    pub duration: Option<std::time::Duration>,
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
    /// Per-request timeout.
    #[arg(long, default_value = "150s", value_parser = parse_duration)]
    pub timeout: std::time::Duration,
    /// Load any path instead (e.g. /healthz, for a baseline): no reset, no
    /// ledger, no verdict; prints throughput, latency and statuses.
    #[arg(long, conflicts_with_all = ["sku", "stock", "json", "check"])]
    pub path: Option<String>,
    /// Write every run as JSON to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
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
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub skus: u64,
    /// Split each SKU's stock over this many buckets at reset (0-64; default:
    /// 8 for lua-sharded, one key for the rest).
    #[arg(long)]
    pub buckets: Option<u32>,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free one; the line
    /// `listening on http://ADDR` on stdout says which).
    #[arg(long, default_value = "127.0.0.1:3000", env = "STOCKLOCK_LISTEN")]
    pub listen: SocketAddr,
    /// The Redis that holds stock, ledger and locks.
    #[arg(
        long,
        default_value = "redis://127.0.0.1:6379",
        env = "STOCKLOCK_REDIS_URL"
    )]
    pub redis_url: String,
    /// Use a Redis Cluster instead of --redis-url: one or more of its nodes,
    /// comma-separated (the others are discovered). Every SKU's keys share a
    /// hash tag, so each SKU lives in one slot and every script works.
    #[arg(long, value_delimiter = ',', env = "STOCKLOCK_REDIS_CLUSTER")]
    pub redis_cluster: Vec<String>,
    /// The independent Redis servers of the `redlock` variant,
    /// comma-separated (five is the usual number; the stock stays on the
    /// main Redis). Without them `redlock` answers 503.
    #[arg(long, value_delimiter = ',', env = "STOCKLOCK_REDLOCK_NODES")]
    pub redlock_nodes: Vec<String>,
    /// How long a request_id's outcome is remembered for retries (a retry
    /// later than this is a new request). Old ids are forgotten a few at a
    /// time as new ones come, so Redis holds about rate × this many.
    #[arg(long, default_value = "1h", value_parser = parse_duration, env = "STOCKLOCK_REQUEST_TTL")]
    pub request_ttl: std::time::Duration,
    /// This instance's name, reported in every answer.
    #[arg(long, env = "STOCKLOCK_INSTANCE")]
    pub instance: Option<String>,
    /// Token for /api/admin/* (Authorization: Bearer TOKEN). A random one is
    /// generated and printed when unset.
    #[arg(long, env = "STOCKLOCK_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// The variant served at /deductStock with no name.
    #[arg(long, default_value = "lua", value_parser = parse_variant, env = "STOCKLOCK_DEFAULT_VARIANT")]
    pub default_variant: Variant,
    /// Give the lab's SKUs (00001 and one per variant) this much stock at
    /// start-up when they have none (what `up --stock` does; for containers).
    #[arg(long, env = "STOCKLOCK_SEED_STOCK")]
    pub seed_stock: Option<i64>,
    /// The stack's URL (nginx): where runs started from the dashboard send
    /// their load. Default: this instance's own address.
    #[arg(long, env = "STOCKLOCK_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Chaos mode: accept the fault actions of /api/admin/chaos and record
    /// every critical section (the lab's overlap witness). Off by default.
    #[arg(long)]
    pub chaos: bool,
    /// Chaos mode: run this instance's clock this many milliseconds ahead
    /// (negative: behind), as `setnx-expiry` reads it.
    #[arg(
        long,
        default_value_t = 0,
        requires = "chaos",
        allow_hyphen_values = true
    )]
    pub clock_skew_ms: i64,
    /// Chaos mode may pause (DEBUG SLEEP) and restart (SHUTDOWN NOSAVE) the
    /// Redis: set by `up` when it owns the Redis and restarts it.
    #[arg(long, requires = "chaos", hide = true)]
    pub chaos_redis: bool,
    /// Stop when standard input closes (how `up` makes sure no instance
    /// outlives it).
    #[arg(long, hide = true)]
    pub exit_with_stdin: bool,
}

/// Parses the command line and runs it.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("stocklock: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run(cli.command));
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(2),
        Err(err) => {
            eprintln!("stocklock: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs a command; `Ok(false)` is a run that worked but found what `--check` refuses.
async fn run(command: Command) -> anyhow::Result<bool> {
    match command {
        Command::Serve(args) => serve(args).await.map(|()| true),
        Command::Lab(args) => {
            telemetry::init("error");
            crate::lab::run(crate::lab::LabConfig {
                scenarios: args.scenarios,
                variants: args.variant,
                json: args.json,
                target: match (args.target, args.admin_token, args.redis_url) {
                    (Some(url), Some(admin_token), Some(redis_url)) => Some(crate::lab::Target {
                        url,
                        admin_token,
                        redis_url,
                    }),
                    _ => None,
                },
            })
            .await
        }
        Command::Resume { pid, after_ms } => {
            crate::chaos::resume(pid, std::time::Duration::from_millis(after_ms));
            Ok(true)
        }
        Command::Load(args) if args.path.is_some() => {
            telemetry::init("warn");
            crate::load::run_path(
                &args.target,
                args.path.as_deref().unwrap_or("/"),
                args.requests,
                args.duration,
                args.concurrency,
                args.rate,
                args.timeout,
            )
            .await
            .map(|()| true)
        }
        Command::Load(args) => {
            telemetry::init("warn");
            crate::load::run(LoadConfig {
                target: args.target,
                variants: args.variant,
                sku: args.sku,
                stock: args.stock.map(crate::knobs::parse_stock).transpose()?,
                admin_token: args.admin_token,
                requests: args.requests,
                duration: args.duration,
                concurrency: args.concurrency,
                rate: args.rate,
                work_ms: args.work_ms,
                lease_ms: args.lease_ms,
                wait_ms: args.wait_ms,
                timeout: args.timeout,
                json: args.json,
                check: args.check,
                expect: args.expect,
                skus: args.skus as usize,
                buckets: args.buckets.map(crate::knobs::parse_buckets).transpose()?,
            })
            .await
        }
        Command::Bench(args) => {
            telemetry::init("warn");
            crate::load::bench::run(crate::load::bench::BenchConfig {
                target: args.target,
                redis_url: args.redis_url,
                admin_token: args.admin_token,
                runs: args.runs,
                concurrency: args.concurrency,
                duration: args.duration,
            })
            .await
            .map(|()| true)
        }
        Command::Up(config) => {
            telemetry::init("info");
            up::run(config).await.map(|()| true)
        }
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    telemetry::init("info");
    let instance = args
        .instance
        .unwrap_or_else(|| format!("pid{}", std::process::id()));
    let admin_token = match args.admin_token {
        Some(token) if !token.is_empty() => token,
        _ => {
            let token = generate_token();
            println!("admin token: {token}");
            token
        }
    };
    if let Some(stock) = args.seed_stock {
        let stock = crate::knobs::parse_stock(stock)?;
        let store = crate::store::Store::open_either(&args.redis_url, &args.redis_cluster)?;
        // Redis may not answer yet; keep trying in the background.
        tokio::spawn(async move {
            loop {
                match up::seed_stock(&store, stock).await {
                    Ok(()) => break,
                    Err(err) => tracing::warn!("seeding stock: {err:#}; retrying"),
                }
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        });
    }
    let app = Application::build(ServeConfig {
        listen: args.listen,
        redis_url: args.redis_url,
        instance: instance.clone(),
        admin_token,
        default_variant: args.default_variant,
        public_url: args.public_url,
        chaos: if args.chaos {
            crate::chaos::Chaos::on(args.clock_skew_ms).with_redis_control(args.chaos_redis)
        } else {
            crate::chaos::Chaos::off()
        },
        redis_cluster: args.redis_cluster,
        redlock_nodes: args.redlock_nodes,
        request_ttl: args.request_ttl,
    })
    .await?;
    // `up` and the tests wait for these lines.
    println!(
        "instance {instance} listening on http://{}",
        app.local_addr()?
    );
    let ready = app.ready();
    let name = instance.clone();
    tokio::spawn(async move {
        ready.await;
        println!("instance {name} is ready (subscribed to lock releases)");
    });
    if args.exit_with_stdin {
        app.run_until(async {
            tokio::select! {
                _ = crate::server::shutdown_signal() => {}
                _ = crate::server::stdin_closed() => {}
            }
        })
        .await?;
    } else {
        app.run_until_stopped().await?;
    }
    Ok(())
}
