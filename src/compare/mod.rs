//! `stocklock compare`: article 000's lock-store table, measured.
//!
//! Article 000 ends with a table of three lock stores: Redis (performance
//! highest, AP, reentrant only with extra work, renewed by Redisson, for
//! high concurrency), ZooKeeper (medium, CP, natively reentrant, no
//! renewal, for strong consistency) and etcd (medium, CP, not reentrant,
//! no renewal, for strong consistency). `compare` starts a stack of its own
//! with every store (one Redis, Redlock's five, a three-member etcd, a
//! ZooKeeper) and measures, side by side in one run:
//!
//! 1. uncontended lock/unlock pairs per second on each store, one client;
//! 2. contended sales per second through nginx, `--concurrency` clients on
//!    one SKU, with the p50 and p99 of a sale, for the lock variant of
//!    each store (`watchdog` for Redis, `redlock`, `etcd`, `zookeeper`,
//!    and `pg-advisory` for PostgreSQL's advisory lock when it is installed);
//! 3. the failover verdict per store, from the lab's `failover` scenario
//!    on a stack with a replicated Redis (`redis+wait`: `failover-wait`,
//!    whose holder's WAIT saw its lock on the replica; `--no-failover`
//!    skips it).
//!
//! Each measurement runs `--runs` times, in turn across the stores, and the
//! medians are compared: a noisy machine slows every store alike.

mod pairs;
mod table;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

pub use self::pairs::{PairStore, Stores, pairs_per_second};
use crate::args::parse_duration;
use crate::harness::stack::{Stack, UpOptions};
use crate::load::engine::Progress;
use crate::load::{LoadConfig, Runner};
use crate::variants::Variant;

/// What `stocklock compare` was asked for: its flags.
#[derive(Clone, Debug, clap::Args)]
pub struct CompareConfig {
    /// Length of each measurement (each store's pairs, each variant's load).
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Runs of each measurement; the medians are shown.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub runs: u32,
    /// Clients at once in the contended runs.
    #[arg(long, short = 'c', default_value_t = 64)]
    pub concurrency: usize,
    /// Skip the failover scenario (it needs redis-sentinel and a second stack).
    #[arg(long)]
    pub no_failover: bool,
    /// Also write every figure as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// One store's row: what the article says, and what was measured.
#[derive(Clone, Debug, Serialize)]
pub struct StoreRow {
    pub store: &'static str,
    /// The variant whose sales were measured.
    pub variant: &'static str,
    /// Every run's uncontended pairs per second, and their median.
    pub pairs_per_s: Vec<f64>,
    pub pairs_per_s_median: Option<f64>,
    /// Every run's contended sales per second, and their median.
    pub sales_per_s: Vec<f64>,
    pub sales_per_s_median: Option<f64>,
    /// The p50 and p99 of a sale in the median run, ms.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// Oversold units over every contended run (must be 0).
    pub oversold: i64,
    /// The lab's `failover` cell for this store (`failover-wait` for
    /// `redis+wait`): observed behaviour and evidence.
    pub failover: Option<String>,
    pub failover_evidence: Option<String>,
}

/// Everything `compare` measured.
#[derive(Clone, Debug, Serialize)]
pub struct CompareReport {
    pub date: String,
    pub machine: crate::load::bench::report::Machine,
    pub runs: u32,
    pub duration_ms: u64,
    pub concurrency: usize,
    pub rows: Vec<StoreRow>,
}

/// The variant that sells through each store's lock.
fn variant_of(store: PairStore) -> Variant {
    match store {
        PairStore::Redis | PairStore::RedisWait => Variant::Watchdog,
        PairStore::Redlock => Variant::Redlock,
        PairStore::Etcd => Variant::Etcd,
        PairStore::ZooKeeper => Variant::ZooKeeper,
        PairStore::Postgres => Variant::PgAdvisory,
    }
}

/// Runs the comparison and prints the table.
pub async fn run(config: CompareConfig) -> anyhow::Result<()> {
    // A replica (and its Sentinels) for the WAIT row, when Sentinel is here.
    let replica = crate::os::find_program("redis-sentinel").is_some();
    let postgres = crate::up::postgres::installed();
    eprintln!(
        "compare: starting a stack with every lock store (Redis{}, 5 Redlock nodes, 3 etcd members, 1 ZooKeeper, {})",
        if replica {
            " with a replica"
        } else {
            "; no replica: redis-sentinel is not installed"
        },
        if postgres {
            "PostgreSQL"
        } else {
            "no PostgreSQL: it is not installed"
        }
    );
    let mut args = vec![
        "--instances",
        "2",
        "--no-chaos",
        "--redlock",
        "5",
        "--etcd",
        "3",
        "--zookeeper",
        "1",
        "--orders",
        if postgres { "on" } else { "off" },
    ];
    if replica {
        args.push("--replica");
    }
    let stack = Stack::start(&UpOptions {
        args: args.into_iter().map(str::to_owned).collect(),
        ..UpOptions::default()
    })
    .await?;
    let measured = measure(&stack, &config).await;
    stack.stop().await;
    let mut rows = measured?;
    if !config.no_failover {
        for (store, cell) in crate::lab::failover_by_store().await? {
            if let Some(row) = rows.iter_mut().find(|r| r.store == store) {
                row.failover = Some(cell.observed);
                row.failover_evidence = Some(cell.evidence);
            }
        }
    }
    let report = CompareReport {
        date: crate::load::bench::utc_now(),
        machine: crate::load::bench::machine(),
        runs: config.runs,
        duration_ms: config.duration.as_millis() as u64,
        concurrency: config.concurrency,
        rows,
    };
    table::print(&report);
    if let Some(path) = &config.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// Every measurement on `stack`, the runs of each taking turns across the
/// stores.
async fn measure(stack: &Stack, config: &CompareConfig) -> anyhow::Result<Vec<StoreRow>> {
    let stores = Stores {
        redis_url: stack
            .redis_url
            .clone()
            .context("the stack announced no Redis")?,
        redlock: stack.redlock_nodes.iter().map(|n| n.url.clone()).collect(),
        etcd: stack.etcd_members.iter().map(|n| n.url.clone()).collect(),
        zookeeper: (!stack.zookeeper.is_empty()).then(|| {
            let servers: Vec<&str> = stack.zookeeper.iter().map(|n| n.url.as_str()).collect();
            servers.join(",")
        }),
        replica: stack.replica.is_some(),
        postgres: stack.postgres.as_ref().map(|node| node.url.clone()),
    };
    let mut rows: Vec<StoreRow> = PairStore::ALL
        .iter()
        .map(|&store| StoreRow {
            store: store.name(),
            variant: variant_of(store).name(),
            pairs_per_s: Vec::new(),
            pairs_per_s_median: None,
            sales_per_s: Vec::new(),
            sales_per_s_median: None,
            p50_ms: None,
            p99_ms: None,
            oversold: 0,
            failover: None,
            failover_evidence: None,
        })
        .collect();
    let mut latencies: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); rows.len()];
    for run in 1..=config.runs {
        for (row, &store) in rows.iter_mut().zip(PairStore::ALL.iter()) {
            eprintln!("compare: run {run}: {} pairs", store.name());
            if let Some(rate) = pairs_per_second(store, &stores, config.duration)
                .await
                .with_context(|| format!("{} pairs", store.name()))?
            {
                row.pairs_per_s.push(rate);
            }
        }
        for (index, &store) in PairStore::ALL.iter().enumerate() {
            if store == PairStore::RedisWait && !stores.replica
                || store == PairStore::Postgres && stores.postgres.is_none()
            {
                continue;
            }
            let variant = variant_of(store);
            eprintln!(
                "compare: run {run}: {variant} sales, {} clients",
                config.concurrency
            );
            let mut load = LoadConfig::new(&stack.url, Some(stack.token.clone()));
            load.stock = Some(1_000_000);
            load.duration = Some(config.duration);
            load.concurrency = config.concurrency;
            load.sku = Some(format!("compare-{}", store.name().replace('+', "-")));
            if store == PairStore::RedisWait {
                load.replicas = Some(1);
            }
            let report = Runner::connect(load)
                .await?
                .run_variant(&variant.info(), &Progress::default())
                .await?;
            let sales_per_s = if report.requests == 0 {
                0.0
            } else {
                report.rps * report.sold as f64 / report.requests as f64
            };
            let row = &mut rows[index];
            row.sales_per_s.push(sales_per_s);
            row.oversold += report.oversold.max(0) + report.duplicates.max(0);
            latencies[index].push((sales_per_s, report.latency_ms.p50, report.latency_ms.p99));
        }
    }
    for (row, runs) in rows.iter_mut().zip(latencies.iter_mut()) {
        row.pairs_per_s_median = median(&row.pairs_per_s);
        row.sales_per_s_median = median(&row.sales_per_s);
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        if let Some(&(_, p50, p99)) = runs.get(runs.len() / 2) {
            row.p50_ms = Some(p50);
            row.p99_ms = Some(p99);
        }
    }
    Ok(rows)
}

/// The median of `values` (the upper one of an even count).
fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_the_middle_run() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0]), Some(4.0));
    }

    #[test]
    fn every_store_sells_through_its_own_variant() {
        let variants: Vec<Variant> = PairStore::ALL.iter().map(|&s| variant_of(s)).collect();
        assert_eq!(
            variants,
            [
                Variant::Watchdog,
                Variant::Watchdog,
                Variant::Redlock,
                Variant::Etcd,
                Variant::ZooKeeper,
                Variant::PgAdvisory
            ]
        );
    }
}
