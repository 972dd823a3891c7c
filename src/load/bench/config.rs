//! What `stocklock bench` is asked for: its flags, and the names of its
//! rows that `--rows` picks from.

use std::path::PathBuf;
use std::time::Duration;

use crate::args::parse_duration;

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
    /// Instead of the rows: every variant safe in the race on one hot SKU
    /// each, at each of `--crowds` buyers at once (12 and 800 by default),
    /// with sales and attempts a second, the share of attempts that
    /// changed nothing, p50/p99, oversold, and each store's CPU per
    /// answer (Redis; PostgreSQL with --postgres-url; etcd and ZooKeeper
    /// with their addresses). Give nginx and the instances room for the
    /// largest crowd (`up`'s nginx holds 4 096 connections a worker).
    #[arg(long)]
    pub crowd: bool,
    /// The crowds of `--crowd`: buyers at once, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "12,800", value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u16).range(1..=4000), usize::from))]
    pub crowds: Vec<usize>,
    /// The variants of `--crowd` (comma-separated); default: every
    /// variant safe in the race.
    #[arg(long, value_delimiter = ',', value_parser = crate::args::parse_variant)]
    pub crowd_variants: Vec<crate::variants::Variant>,
    /// The etcd members' client addresses (`http://host:port`,
    /// comma-separated), for `--crowd`'s etcd CPU per answer.
    #[arg(long = "etcd-endpoints", value_delimiter = ',', env = "STOCKLOCK_ETCD_ENDPOINTS", value_parser = super::crowd::store_addr)]
    pub etcd: Vec<std::net::SocketAddr>,
    /// The ZooKeeper servers' client addresses (`host:port`,
    /// comma-separated), for `--crowd`'s ZooKeeper CPU per answer.
    #[arg(long, value_delimiter = ',', env = "STOCKLOCK_ZOOKEEPER", value_parser = super::crowd::store_addr)]
    pub zookeeper: Vec<std::net::SocketAddr>,
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
    PgUpdateSyncOffVsOn,
    PgBatchVsUpdate,
    #[value(name = "classroom-30-vs-1")]
    Classroom30Vs1,
}
