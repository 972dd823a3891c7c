//! `stocklock serve`: its flags ([`ServeArgs`]) and how they become one
//! running instance ([`crate::server::Application`]).

use std::net::SocketAddr;

use anyhow::Context;
use clap::Args;

use crate::args::{parse_duration, parse_duration_or_zero, parse_variant};
use crate::server::{Application, ServeConfig};
use crate::telemetry;
use crate::up;
use crate::variants::Variant;

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
    /// The most buyers of one SKU lua-batch sends to Redis in one call, and
    /// pg-batch decides in one transaction (1 to 1024). The buyers who
    /// queued while a batch was in flight go in the next one, up to this
    /// many; a lone buyer goes at once.
    #[arg(long, env = "STOCKLOCK_BATCH_MAX", default_value_t = crate::variants::DEFAULT_BATCH_MAX,
          value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u16).range(1..=crate::variants::MAX_BATCH_MAX as i64), usize::from))]
    pub batch_max: usize,
}

pub(super) async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    telemetry::init("info");
    if crate::chaos::mutant::on(crate::chaos::mutant::Mutant::NoScriptReload) {
        crate::store::give_scripts_once();
    }
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
