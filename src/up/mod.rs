//! `stocklock up`: the whole stack on one machine, supervised.
//!
//! Starts redis-server (unless `--redis-url` names one; with `--replica`
//! also its replica, the replication relay and three Sentinels, and the
//! instances then find the master through the Sentinels), the lock stores,
//! PostgreSQL for the orders (unless `--orders off` or `--postgres-url`
//! names one; each instance migrates its schema at start), N instances of this
//! same binary, and nginx in front of them, all on loopback and all as
//! children. It waits until everything answers, gives the lab's SKUs their
//! stock, prints the URL and the admin token, restarts an instance that dies,
//! and on Ctrl-C, SIGTERM or SIGHUP stops every child and removes its files.
//! Each child runs in its own process group (a terminal's Ctrl-C reaches
//! `up` alone) and dies with `up` even when `up` is SIGKILLed; the next
//! `up` then removes the run directory the dead one left.
//!
//! Lines on stdout other programs can rely on (the tests do):
//!
//! ```text
//! redis: pid 123 redis://127.0.0.1:PORT          (again after every restart)
//! redis cluster: pids 1,2,3 redis://127.0.0.1:P1,redis://127.0.0.1:P2,...  (--cluster)
//! redis replica: pid 129 redis://127.0.0.1:PORT   (--replica: the main Redis's replica)
//! replication relay: pid 130 127.0.0.1:PORT       (--replica: what the replica replicates through)
//! sentinel 1: pid 131 127.0.0.1:PORT              (--replica: one line per Sentinel, three)
//! redis relay 1: pid 133 127.0.0.1:PORT         (--store-relays: instance a's way to Redis; one per instance)
//! redlock node 1: pid 127 redis://127.0.0.1:PORT  (one line per node; --redlock N)
//! etcd member 1: pid 128 http://127.0.0.1:PORT    (one line per member; --etcd N)
//! zookeeper 1: pid 128 127.0.0.1:PORT            (one line per server; --zookeeper N)
//! postgres: pid 132 postgresql://stocklock:PASSWORD@127.0.0.1:PORT/stocklock  (orders on, no --postgres-url; again after every restart)
//! instance a: pid 124 http://127.0.0.1:PORT      (again after every restart; a new PORT if its old one was taken)
//! nginx: pid 126 http://127.0.0.1:8080
//! stocklock is up: http://127.0.0.1:8080/
//! prometheus targets: 127.0.0.1:P1,127.0.0.1:P2 (...)
//! prometheus.yml: scrape_configs: [{job_name: stocklock, ...}]   (a whole config file)
//! dashboard: http://127.0.0.1:8080/#token=TOKEN
//! admin token: TOKEN
//! ```

/// Prints a line on stdout for the user and for programs that read it;
/// a reader that went away is not a reason to crash the supervisor.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

mod config;
pub mod etcd;
mod front;
mod instances;
pub mod nginx;
pub mod pg_relay;
pub mod postgres;
mod seed;
pub use seed::{seed_stock, seed_stock_in_background};
pub mod process;
pub mod redis;
pub mod relay;
mod run_dir;
pub mod sentinel;
mod stores;
pub mod zookeeper;

use std::net::SocketAddr;

use anyhow::Context;

pub use self::config::UpConfig;
use self::front::Front;
pub use self::front::scrape_config;
use self::instances::{Instances, Shared};
use self::nginx::Nginx;
use self::redis::RedisServer;
use self::stores::{Exited, Stores};
use crate::args::generate_token;
use crate::knobs::parse_stock;
use crate::os::shutdown_signal;

/// Masters of the cluster `up --cluster` starts.
pub const CLUSTER_MASTERS: usize = 3;

/// Runs the stack until Ctrl-C, SIGTERM or SIGHUP: its stores, its instances and
/// nginx in front, supervised; then stops them all.
pub async fn run(config: UpConfig) -> anyhow::Result<()> {
    let stock = parse_stock(config.stock)?;
    let admin_token = config.admin_token.clone().unwrap_or_else(generate_token);
    // Fail before starting anything if a piece is missing.
    process::require_program("nginx", "nginx-light")?;
    if config.redis_url.is_none() {
        process::require_program("redis-server", "redis-server")?;
    }
    if config.replica {
        process::require_program("redis-sentinel", "redis-sentinel")?;
    }
    let front = Front::parse(&config)?;
    // From here a stop signal waits for `until_stopped` (our children die
    // with us either way, but the run directory would stay).
    let shutdown = shutdown_signal();
    process::children_die_with_us()?;
    let run_dir = run_dir::create(None)?;

    let mut stores = Stores::start(&config, run_dir.path()).await?;
    seed_stock(&stores.store()?, stores.postgres_url.as_deref(), stock).await?;
    let mut relays = store_relays(&config, &stores.redis_url).await?;
    let mut instances = Instances::start(
        config.instances,
        &Shared {
            redis_url: stores.redis_url.clone(),
            relay_urls: relays
                .iter()
                .map(|r| format!("redis://{}", r.listen()))
                .collect(),
            redis_cluster: stores.cluster_urls(),
            sentinels: stores.sentinel_addrs(),
            lock_stores: stores.lock_stores(),
            postgres_url: stores.postgres_url.clone(),
            request_ttl: config.request_ttl,
            sold_out_mark_ttl: config.sold_out_mark_ttl,
            order_timing: crate::orders::Timing {
                pay_within: config.pay_within,
                claim_idle: config.claim_idle,
            },
            admin_token: admin_token.clone(),
            default_variant: config.default_variant,
            public_url: front.public_url.clone(),
            chaos: !config.no_chaos,
            owns_redis: stores.restarts_redis(),
            bench_bare: config.bench_bare,
            batch_max: config.batch_max,
            gate_redis: config.gate_redis.clone(),
        },
        &config.clock_skew_ms,
    )
    .await?;
    let mut nginx = Nginx::start(run_dir.path(), front.listen, &instances.addrs).await?;
    if config.classroom {
        crate::classroom::set_open(&stores.store()?, true).await?;
    }
    let modes = front::Modes {
        chaos: !config.no_chaos,
        classroom: config.classroom,
    };
    front.announce(&nginx, &instances.addrs, modes, &admin_token);

    let ended_by = until_stopped(shutdown, &mut nginx, &mut stores, &mut instances).await?;
    tracing::info!("stopping after {ended_by}");
    nginx.stop().await;
    instances.stop().await;
    for relay in &mut relays {
        relay.stop().await;
    }
    stores.stop().await;
    drop(run_dir);
    say!("stocklock stopped");
    Ok(())
}

/// `--store-relays`: one relay to the main Redis per instance, announced.
async fn store_relays(config: &UpConfig, redis_url: &str) -> anyhow::Result<Vec<relay::Relay>> {
    if !config.store_relays {
        return Ok(Vec::new());
    }
    let to = redis_url
        .strip_prefix("redis://")
        .and_then(|rest| rest.split('/').next())
        .and_then(|addr| addr.parse::<SocketAddr>().ok())
        .with_context(|| {
            format!("--store-relays needs a plain redis://HOST:PORT, not {redis_url}")
        })?;
    let mut relays = Vec::new();
    for index in 1..=config.instances {
        let relay = relay::Relay::start(to).await?;
        say!(
            "redis relay {index}: pid {} {}",
            relay.pid().unwrap_or(0),
            relay.listen()
        );
        relays.push(relay);
    }
    Ok(relays)
}

/// Runs until asked to stop or nginx dies; our Redis is restarted on its
/// port whenever it exits (chaos mode's "restart Redis" relies on it),
/// but under `--replica`, where the Sentinels fail over instead; our
/// PostgreSQL likewise, with its data. An instance restarted on a new port
/// (its old one taken) gets nginx's traffic once nginx has reloaded.
/// What ended it, for the log.
async fn until_stopped(
    shutdown: impl std::future::Future<Output = ()>,
    nginx: &mut Nginx,
    stores: &mut Stores,
    instances: &mut Instances,
) -> anyhow::Result<String> {
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => return Ok("a stop signal".to_owned()),
            status = nginx.exited() => {
                return Ok(format!("nginx exiting ({status:?}):\n{}", nginx.log()));
            }
            done = instances.moved() => {
                if let Err(err) = nginx.reload(&instances.addrs).await {
                    tracing::error!("nginx did not follow a moved instance: {err:#}");
                }
                let _ = done.send(());
            }
            exited = stores.exited() => match exited {
                Exited::Redis(status) => {
                    let port = stores.redis.as_ref().map(RedisServer::port).unwrap_or(0);
                    tracing::warn!(?status, "redis-server exited; restarting it on port {port}");
                    stores.restart_redis().await?;
                }
                Exited::Postgres(status) => {
                    tracing::warn!(?status, "postgres exited; restarting it on its port");
                    stores.restart_postgres().await;
                }
            },
        }
    }
}
