//! The command line: `stocklock serve`, `up`, `load`, `bench`, `compare`,
//! `reconcile`, `lab`, `check`, `replay`, `explore` and `soak` (and the hidden
//! `resume` of chaos mode's pauses and `relay`, a relay process of `up`).
//!
//! `load`, `bench` and `up` parse into their config types ([`LoadConfig`],
//! [`BenchConfig`], [`UpConfig`]); shared values are parsed in [`crate::args`].

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::LazyLock;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use crate::args::{parse_duration, parse_duration_or_zero, parse_variant};
use crate::load::LoadConfig;
use crate::load::bench::BenchConfig;
use crate::server::{Application, ServeConfig};
use crate::telemetry;
use crate::up::{self, UpConfig};
use crate::variants::Variant;

/// The top-level help, naming every variant from [`Variant::ALL`] so that
/// a new one is never left out.
static ABOUT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "A flash-sale stock protection lab: the same sale behind each of {} protections ({}), \
         on real Redis behind real nginx.",
        Variant::ALL.len(),
        Variant::names().join(", ")
    )
});

#[derive(Parser, Debug)]
#[command(name = "stocklock", version, about = ABOUT.as_str(), long_about = None)]
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
    /// from its ledger: SAFE, OVERSOLD n, DUPLICATES n, STUCK or LEDGER_BROKEN n.
    Load(LoadConfig),
    /// Measure costs side by side on a running stack: our generator vs oha,
    /// lua vs /healthz, what the timeline costs lua, sold-out answers,
    /// watchdog vs the lock hand-off ceiling, Redlock, memory.
    Bench(BenchConfig),
    /// Article 000's lock-store table, measured on a stack of its own:
    /// uncontended lock pairs/s per store (Redis, Redlock, etcd,
    /// ZooKeeper), contended sales/s with p50/p99 through nginx, and each
    /// store's failover verdict.
    Compare(crate::compare::CompareConfig),
    /// Compare the Redis ledger with the orders in PostgreSQL, per SKU: units
    /// sold with no order (lost), orders with no sale (phantom), units
    /// ordered twice, units returned twice, and orders of epochs the ledger
    /// lost (LEDGER_LOST: Redis lost its data). Exit 0 only when all match.
    Reconcile(crate::reconcile::ReconcileArgs),
    /// Run the failure scenarios end to end on a stack of its own and print
    /// the teaching matrix: expected vs observed, with the evidence.
    Lab(crate::lab::LabArgs),
    Check(crate::check::CheckArgs),
    /// Replay the checker's counterexample of one cell on a live stack of
    /// its own, step for step through the gates, and judge the live ledger.
    Replay(crate::lab::replay::ReplayArgs),
    /// Run schedules of the real code chosen at random (or by PCT) on a
    /// live stack of its own, with the scenario's faults, and judge each.
    Explore(crate::lab::explore::ExploreArgs),
    /// The nemesis: random faults under load on every variant, judged from the history.
    Soak(crate::lab::soak::SoakArgs),
    /// (internal) SIGCONT to PID after a delay (chaos mode's pause).
    #[command(hide = true)]
    Resume {
        #[arg(long)]
        pid: u32,
        #[arg(long)]
        after_ms: u64,
    },
    /// (internal) The relay of `up --replica` and `--store-relays`: a TCP
    /// forwarder from LISTEN to TO, its own process (SIGSTOP holds its bytes).
    #[command(hide = true)]
    Relay {
        #[arg(long)]
        listen: SocketAddr,
        #[arg(long)]
        to: SocketAddr,
    },
    /// (internal) How `up` owns its children: `__child`, `__guard-group`.
    #[command(flatten)]
    Owned(up::process::Owned),
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
        env = "STOCKLOCK_REDIS_URL",
        hide_env_values = true
    )]
    pub redis_url: String,
    /// Use a Redis Cluster instead of --redis-url: one or more of its nodes,
    /// comma-separated (the others are discovered). Every SKU's keys share a
    /// hash tag, so each SKU lives in one slot and every script works.
    #[arg(long, value_delimiter = ',', env = "STOCKLOCK_REDIS_CLUSTER")]
    pub redis_cluster: Vec<String>,
    /// Find the Redis master through these Sentinels (`host:port`,
    /// comma-separated) instead of --redis-url: every (re)connection asks
    /// them who the master is, so the instance follows a failover.
    #[arg(
        long,
        value_delimiter = ',',
        env = "STOCKLOCK_SENTINEL",
        conflicts_with = "redis_cluster"
    )]
    pub sentinel: Vec<String>,
    /// The name the Sentinels know the master by.
    #[arg(long, default_value = crate::store::SENTINEL_MASTER, env = "STOCKLOCK_SENTINEL_MASTER")]
    pub sentinel_master: String,
    /// The lock stores beside the main Redis (Redlock's nodes, etcd, ZooKeeper).
    #[command(flatten)]
    pub lock_stores: crate::lock::LockStoresConfig,
    /// The orders' PostgreSQL (`postgresql://user@host:port/database`;
    /// `up` prints its own). The instance migrates its schema at start and
    /// does not start when it cannot. Unset: no orders.
    #[arg(long, env = "STOCKLOCK_POSTGRES_URL", hide_env_values = true)]
    pub postgres_url: Option<String>,
    /// How long a reservation (an order pending payment) waits to be paid
    /// (POST /api/orders/{id}/pay); past it the order expires and its unit
    /// goes back to the stock, once.
    #[arg(long, default_value = "15m", value_parser = parse_duration, env = "STOCKLOCK_PAY_WITHIN")]
    pub pay_within: std::time::Duration,
    /// How long an order message may sit unacked with a worker before a
    /// live worker claims it (XAUTOCLAIM): how soon a dead worker's
    /// orders are written by another.
    #[arg(long, default_value = "5s", value_parser = parse_duration, env = "STOCKLOCK_CLAIM_IDLE")]
    pub claim_idle: std::time::Duration,
    /// How long a request_id's outcome is remembered for retries (a retry
    /// later than this is a new request). Old ids are forgotten a few at a
    /// time as new ones come, so Redis holds about rate × this many.
    #[arg(long, default_value = "1h", value_parser = parse_duration, env = "STOCKLOCK_REQUEST_TTL")]
    pub request_ttl: std::time::Duration,
    /// How many request ids a SKU remembers at most: a request with a new
    /// id past it is answered busy (429, reason request_ids_full) and sells
    /// nothing; ids already known are answered as ever. A sold-out answer's
    /// record is kept 10 s only (repeating it is safe), and past the cap a
    /// sold-out answer is given without one. Bounds the memory that
    /// distinct ids take in Redis.
    #[arg(long, default_value_t = crate::ledger::DEFAULT_REQUEST_IDS_PER_SKU, value_parser = clap::value_parser!(u64).range(1..), env = "STOCKLOCK_REQUEST_IDS_PER_SKU")]
    pub request_ids_per_sku: u64,
    /// How long a sold-out mark lives: once Redis said a SKU is sold out,
    /// this instance answers its next buyers "sold out" itself for this
    /// long (the lua family, whose sale is one script; others with
    /// sold_out_mark=1). A reset clears it at once when its announcement
    /// arrives; 0 turns marks off.
    #[arg(long, default_value = "1s", value_parser = parse_duration_or_zero, env = "STOCKLOCK_SOLD_OUT_MARK_TTL")]
    pub sold_out_mark_ttl: std::time::Duration,
    /// Per-client budget on deduct, timeline, orders (N/s, N/min, N/h or off).
    #[arg(long, default_value = crate::http::limit::DEFAULT_RATE, value_parser = crate::http::limit::parse_budget, long_help = crate::http::limit::HELP, env = "STOCKLOCK_RATE_LIMIT")]
    pub rate_limit: crate::http::limit::Budget,
    /// This instance's name, reported in every answer.
    #[arg(long, env = "STOCKLOCK_INSTANCE")]
    pub instance: Option<String>,
    /// Token for /api/admin/* (Authorization: Bearer TOKEN). A random one is
    /// generated and printed when unset; the placeholder `change-me` is refused.
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
    /// Chaos mode: accept the fault actions of /api/admin/chaos (and the
    /// lessons' experiments). Off by default.
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
    /// Chaos mode: scheduled requests' gates meet on this Redis, not the
    /// stock's (a replay keeps a failover's schedule out of its master).
    #[arg(
        long,
        value_name = "URL",
        requires = "chaos",
        env = "STOCKLOCK_GATE_REDIS"
    )]
    pub gate_redis: Option<String>,
    /// Stop when standard input closes (how `up` makes sure no instance
    /// outlives it).
    #[arg(long, hide = true)]
    pub exit_with_stdin: bool,
    /// Threads serving requests (default: one per core). `up` gives each
    /// of its N instances cores/N: on a small machine, instances sharing
    /// the cores with nginx and Redis lose more to threads handing work
    /// to each other than they gain.
    #[arg(long, env = "STOCKLOCK_WORKER_THREADS")]
    pub worker_threads: Option<std::num::NonZeroUsize>,
    /// Serve GET /bench/bare, the baseline of `stocklock bench`'s row
    /// lua-vs-bare: one bare script call on keys of its own, nothing else.
    /// Off by default (the route is then 404); `up --bench-bare` sets it.
    #[arg(long, env = "STOCKLOCK_BENCH_BARE")]
    pub bench_bare: bool,
    /// The most buyers of one SKU lua-batch sends to Redis in one call
    /// (1 to 1024). The buyers who queued while a call was in flight go in
    /// the next one, up to this many; a lone buyer goes at once.
    #[arg(long, env = "STOCKLOCK_BATCH_MAX", default_value_t = crate::variants::DEFAULT_BATCH_MAX,
          value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u16).range(1..=crate::variants::MAX_BATCH_MAX as i64), usize::from))]
    pub batch_max: usize,
}

/// Parses the command line and runs it.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Owned(owned) = &cli.command {
        return owned.run(); // an exec or a wait: no runtime
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Command::Serve(ServeArgs {
        worker_threads: Some(n),
        ..
    }) = &cli.command
    {
        builder.worker_threads(n.get());
    }
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("stocklock: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.command)) {
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
            let lesson = args.lesson.clone().zip(args.target.redis_url.clone());
            // A lesson's cells are read back from a JSON file of our own.
            let dir = lesson.as_ref().map(|_| tempfile::tempdir()).transpose()?;
            let json = match &dir {
                Some(dir) => Some(dir.path().join("lab.json")),
                None => args.json,
            };
            let ran = crate::lab::run(crate::lab::LabConfig {
                scenarios: args.scenarios,
                variants: args.variant,
                json: json.clone(),
                timelines: args.timelines,
                target: match (
                    args.target.target,
                    args.target.admin_token,
                    args.target.redis_url,
                ) {
                    (Some(url), Some(admin_token), Some(redis_url)) => Some(crate::lab::Target {
                        url,
                        admin_token,
                        redis_url,
                    }),
                    _ => None,
                },
            })
            .await;
            let Some((id, redis_url)) = lesson else {
                return ran;
            };
            let cells = ran.and_then(|_| {
                let path = json.unwrap_or_default();
                let bytes = std::fs::read(&path)?;
                Ok(serde_json::from_slice::<crate::lab::LabReport>(&bytes)?.cells)
            });
            crate::lessons::finish(&redis_url, &id, cells).await?;
            Ok(true)
        }
        Command::Check(args) => crate::check::report::run(args),
        Command::Replay(args) => {
            telemetry::init("error");
            // Its Redis and its stack die with it, however it dies.
            up::process::children_die_with_us()?;
            crate::lab::replay::run(args).await
        }
        Command::Explore(args) => {
            telemetry::init("error");
            up::process::children_die_with_us()?;
            crate::lab::explore::run(args).await
        }
        Command::Soak(args) => crate::lab::soak::run(args).await,
        Command::Reconcile(args) => {
            telemetry::init("warn");
            crate::reconcile::run(args).await
        }
        Command::Resume { pid, after_ms } => {
            crate::chaos::resume(pid, std::time::Duration::from_millis(after_ms));
            Ok(true)
        }
        Command::Relay { listen, to } => up::relay::run(listen, to).await.map(|()| true),
        Command::Owned(_) => anyhow::bail!("`main` runs it before any runtime"),
        Command::Load(config) => {
            telemetry::init("warn");
            crate::load::run(config).await
        }
        Command::Bench(config) => {
            telemetry::init("warn");
            crate::load::bench::run(config).await.map(|()| true)
        }
        Command::Compare(config) => {
            telemetry::init("warn");
            crate::compare::run(config).await.map(|()| true)
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
    let admin_token = crate::args::serve_admin_token(args.admin_token)?;
    if let Some(url) = &args.postgres_url {
        let mut client = crate::orders::connect(url).await?;
        let applied = crate::orders::migrate(&mut client)
            .await
            .context("cannot migrate the orders' schema")?;
        tracing::info!(?applied, "orders' schema is current");
    }
    if let Some(stock) = args.seed_stock {
        let stock = crate::knobs::parse_stock(stock)?;
        let store = crate::store::open_any(
            &args.redis_url,
            &args.redis_cluster,
            &args.sentinel,
            &args.sentinel_master,
        )?;
        up::seed_stock_in_background(store, args.postgres_url.clone(), stock);
    }
    let app = Application::build(ServeConfig {
        listen: args.listen,
        redis_url: args.redis_url,
        instance: instance.clone(),
        admin_token,
        default_variant: args.default_variant,
        public_url: args.public_url,
        chaos: if args.chaos {
            crate::chaos::Chaos::on(args.clock_skew_ms)
                .with_redis_control(args.chaos_redis)
                .with_gate_redis(
                    args.gate_redis
                        .as_deref()
                        .map(redis::Client::open)
                        .transpose()?,
                )
                .named(&instance)
        } else {
            crate::chaos::Chaos::off()
        },
        redis_cluster: args.redis_cluster,
        sentinel: args.sentinel,
        sentinel_master: args.sentinel_master,
        lock_stores: args.lock_stores,
        request_ttl: args.request_ttl,
        request_ids_per_sku: args.request_ids_per_sku,
        sold_out_mark_ttl: args.sold_out_mark_ttl,
        rate_limit: args.rate_limit.0,
        bench_bare: args.bench_bare,
        batch_max: args.batch_max,
        orders: args
            .postgres_url
            .clone()
            .map(|postgres_url| crate::orders::OrdersConfig {
                postgres_url,
                pay_within: args.pay_within,
                claim_idle: args.claim_idle,
            }),
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
                _ = crate::os::shutdown_signal() => {}
                _ = crate::server::stdin_closed() => {}
            }
        })
        .await?;
    } else {
        app.run_until_stopped().await?;
    }
    Ok(())
}
