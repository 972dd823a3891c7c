//! `up`'s command line: the flags of the stack it starts, and its defaults.

use std::time::Duration;

use crate::args::{Switch, parse_duration, parse_duration_or_zero, parse_variant};
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
    /// Opens the classroom: students who follow the join link (`/join`,
    /// printed, and shown with its QR code on `/classroom`) each get a seat
    /// that steps through races of its own without the admin token. Needs
    /// chaos mode, which step mode's gates use.
    #[arg(long, conflicts_with = "no_chaos")]
    pub classroom: bool,
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
    /// The most buyers of one SKU lua-batch sends to Redis in one call, and
    /// pg-batch decides in one transaction; see `stocklock serve --help`.
    #[arg(long, default_value_t = crate::variants::DEFAULT_BATCH_MAX,
          value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u16).range(1..=crate::variants::MAX_BATCH_MAX as i64), usize::from))]
    pub batch_max: usize,
}
