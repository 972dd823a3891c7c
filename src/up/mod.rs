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

pub mod etcd;
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

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use anyhow::Context;

use self::instances::{Instances, Shared};
use self::nginx::Nginx;
use self::redis::RedisServer;
use self::stores::{Exited, Stores};
use crate::args::{Switch, generate_token, parse_duration, parse_duration_or_zero, parse_variant};
use crate::knobs::parse_stock;
use crate::os::shutdown_signal;
use crate::variants::Variant;

/// What `up` was asked for: its flags.
#[derive(Clone, Debug, clap::Args)]
pub struct UpConfig {
    /// Port nginx listens on: the one URL users and load generators hit.
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// The address nginx listens on: 127.0.0.1 serves this machine only,
    /// 0.0.0.0 lets a classroom's other machines in. /api/admin/ (resets,
    /// chaos, the dashboard's runs and lessons) stays loopback-only either way.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// How many instances to run behind nginx.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=26))]
    pub instances: u16,
    /// Use this Redis instead of starting one.
    #[arg(long, env = "STOCKLOCK_REDIS_URL")]
    pub redis_url: Option<String>,
    /// Port for the redis-server `up` starts (default: a free one).
    #[arg(long, conflicts_with = "redis_url")]
    pub redis_port: Option<u16>,
    /// Stock given to every SKU the lab uses (00001 and one per variant) when
    /// it has none yet.
    #[arg(long, default_value_t = 50)]
    pub stock: i64,
    /// The token for /api/admin/* (the printed dashboard URL carries it);
    /// generated and printed when unset.
    #[arg(long, env = "STOCKLOCK_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// The variant served at /deductStock with no name.
    #[arg(long, default_value = "lua", value_parser = parse_variant)]
    pub default_variant: Variant,
    /// Chaos mode is on by default under `up` (this is a lab): the fault
    /// actions of /api/admin/chaos (crash after SETNX, freeze a holder,
    /// delete a lock, crash an instance, pause or restart Redis; admin token
    /// and loopback only) and the overlap witness. This turns it off, and
    /// takes DEBUG and CONFIG away from the clients of up's Redis.
    #[arg(long)]
    pub no_chaos: bool,
    /// Accepted for clarity; chaos mode is already the default.
    #[arg(long, conflicts_with = "no_chaos")]
    pub chaos: bool,
    /// Each instance's clock offset in ms, in order (a,b,...), e.g. `0,5000`
    /// runs b five seconds ahead (the clock-skew scenario; chaos mode).
    #[arg(
        long,
        conflicts_with = "no_chaos",
        value_delimiter = ',',
        allow_hyphen_values = true
    )]
    pub clock_skew_ms: Vec<i64>,
    /// Chaos mode: scheduled requests' gates meet on this Redis instead of
    /// the stack's own (`replay` keeps a failover's schedule there, out of
    /// the master it kills). The URL reaches the instances through their
    /// environment.
    #[arg(long, value_name = "URL", conflicts_with = "no_chaos")]
    pub gate_redis: Option<String>,
    /// Start this many independent redis-servers for the `redlock` variant
    /// (0: none, and `redlock` answers 503 not_configured). The stock stays on the main Redis.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(0..=9))]
    pub redlock: u16,
    /// Start an etcd cluster of this many members (the etcd lock's store;
    /// 0: none). Without the etcd binary it starts none and says so.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(0..=9))]
    pub etcd: u16,
    /// How many ZooKeeper servers to start (Debian's `zookeeper` package, a
    /// JVM each) for the `zookeeper` lock: 1 a standalone server, 3 an
    /// ensemble; 0 none. A count, where `serve --zookeeper` takes a connect
    /// string: `up` passes its servers' to the instances. When ZooKeeper is
    /// not installed, `up` says so and runs without it.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(0..=7))]
    pub zookeeper: u16,
    /// Orders: `on` runs PostgreSQL (the one `--postgres-url` names, or
    /// one `up` starts: initdb into a temporary directory, a free loopback
    /// port) and gives it to the instances, which migrate its schema at
    /// start; `off` runs none. When PostgreSQL is not installed, `up` says
    /// so and runs without orders.
    #[arg(long, value_enum, default_value_t = Switch::On)]
    pub orders: Switch,
    /// Use this PostgreSQL for the orders instead of starting one
    /// (`postgresql://user[:password]@host:port/database`).
    #[arg(long, env = "STOCKLOCK_POSTGRES_URL", hide_env_values = true)]
    pub postgres_url: Option<String>,
    /// Start a local 3-master Redis Cluster (redis-server in cluster mode and
    /// `redis-cli --cluster create`) and run the instances on it, instead of
    /// one redis-server. Chaos mode then cannot pause or restart Redis.
    #[arg(long, conflicts_with_all = ["redis_url", "redis_port"])]
    pub cluster: bool,
    /// Run the Redis `up` starts with an append-only file fsynced before
    /// every reply (appendfsync always), kept across its restarts: a crash of
    /// Redis (kill -9, chaos restart) loses no sale it acknowledged. Without
    /// it Redis keeps nothing on disk and a restart comes back empty.
    #[arg(long, conflicts_with_all = ["redis_url", "cluster"])]
    pub persist: bool,
    /// Run the main Redis with one replica and three Sentinels (Debian's
    /// redis-sentinel) that fail over to the replica when the master dies;
    /// the instances find the master through them and follow a failover.
    /// The replica replicates through a relay process (`replication relay:
    /// pid N`): SIGSTOP it to hold replication back, and a lock taken on the
    /// master is lost in the failover. The master is not restarted.
    #[arg(long, conflicts_with_all = ["redis_url", "cluster", "persist"])]
    pub replica: bool,
    /// Route each instance's connections to the main Redis through a relay
    /// process of its own (`redis relay 1: pid N 127.0.0.1:PORT` for
    /// instance a): SIGSTOP a relay and its instance is cut off from Redis
    /// (a partition; what it sent waits in the kernel and arrives late on
    /// SIGCONT). `stocklock soak` asks for it. Not with --cluster or --replica.
    #[arg(long, conflicts_with_all = ["cluster", "replica"])]
    pub store_relays: bool,
    /// How long the instances remember a request_id's outcome for retries.
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub request_ttl: Duration,
    /// How long an instance's sold-out mark of a SKU lives (0: no marks);
    /// see `stocklock serve --help`.
    #[arg(long, default_value = "1s", value_parser = parse_duration_or_zero)]
    pub sold_out_mark_ttl: Duration,
    /// How long a reservation waits to be paid before it expires and its
    /// unit goes back to the stock; see `stocklock serve --help`.
    #[arg(long, default_value = "15m", value_parser = parse_duration)]
    pub pay_within: Duration,
    /// How long a dead worker's order messages sit before a live worker
    /// claims them; see `stocklock serve --help`.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub claim_idle: Duration,
    /// Start the instances with `serve --bench-bare`: they serve GET
    /// /bench/bare, the baseline of `stocklock bench`'s row lua-vs-bare.
    #[arg(long)]
    pub bench_bare: bool,
    /// The most buyers of one SKU lua-batch sends to Redis in one call; see
    /// `stocklock serve --help`.
    #[arg(long, default_value_t = crate::variants::DEFAULT_BATCH_MAX,
          value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u16).range(1..=crate::variants::MAX_BATCH_MAX as i64), usize::from))]
    pub batch_max: usize,
}

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
    front.announce(&nginx, &instances.addrs, !config.no_chaos, &admin_token);

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

/// Where users reach the stack: nginx's address, and the URL shown for it.
struct Front {
    listen: SocketAddr,
    /// The host in the URLs printed (loopback when nginx binds every address).
    shown_host: String,
    port: u16,
    /// `http://host:port`: the dashboard's, and where its runs send their load.
    public_url: String,
}

impl Front {
    fn parse(config: &UpConfig) -> anyhow::Result<Front> {
        let host: IpAddr = config
            .host
            .parse()
            .with_context(|| format!("--host {:?} is not an IP address", config.host))?;
        let shown_host = if host.is_unspecified() {
            "127.0.0.1".to_owned()
        } else {
            host.to_string()
        };
        Ok(Front {
            listen: SocketAddr::new(host, config.port),
            public_url: format!("http://{shown_host}:{}", config.port),
            shown_host,
            port: config.port,
        })
    }

    /// The lines that say the stack is up (the lab and the tests wait for
    /// the last: the admin token), with the instances' own addresses as
    /// Prometheus's targets (they keep their address across restarts, unless
    /// another process took it meanwhile).
    fn announce(&self, nginx: &Nginx, instances: &[SocketAddr], chaos: bool, admin_token: &str) {
        let public_url = &self.public_url;
        say!(
            "nginx: pid {} http://{}",
            nginx.pid().unwrap_or(0),
            self.listen
        );
        say!("stocklock is up: {public_url}/");
        if chaos {
            say!(
                "chaos mode is ON (--no-chaos turns it off): /api/admin/chaos can crash, freeze and break the instances and Redis"
            );
        } else {
            say!("chaos mode is off");
        }
        let targets: Vec<String> = instances.iter().map(SocketAddr::to_string).collect();
        say!(
            "prometheus targets: {} (each instance's own /metrics; nginx's /metrics only points here)",
            targets.join(",")
        );
        say!("prometheus.yml: {}", scrape_config(&targets));
        say!("dashboard: {public_url}/#token={admin_token}");
        say!("admin token: {admin_token}");
        say!(
            "try: curl -s 'http://{}:{}/deductStock/lua?sku=lua'   (Ctrl-C stops everything)",
            self.shown_host,
            self.port
        );
    }
}

/// A whole Prometheus configuration, on one line, that scrapes `targets`
/// (`host:port` of each instance). `honor_labels` keeps the instances' own
/// `instance` label (a, b, ...) instead of renaming it `exported_instance`.
pub fn scrape_config(targets: &[String]) -> String {
    let quoted: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
    format!(
        "scrape_configs: [{{job_name: stocklock, honor_labels: true, static_configs: [{{targets: [{}]}}]}}]",
        quoted.join(", ")
    )
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
