//! A local 3-master Redis Cluster, started by the real `stocklock up
//! --cluster`: the variants that are safe on one Redis stay safe with their
//! SKUs spread over the three masters, and `lua-sharded` sells a hot SKU's
//! stock exactly, its buckets spread over the masters and its retries
//! answered once. The keys are looked up on the masters themselves, over
//! plain (non-cluster) connections: a key a master does not own is an
//! error there, so finding it proves where it lives.
//!
//! This file: the fixtures and the safe variants over 100 SKUs;
//! `lua_sharded.rs`: one hot SKU split over buckets on several masters;
//! `retries.rs`: a sale held up on its master is never sent twice.

mod lua_sharded;
mod retries;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redis::FromRedisValue;
use redis::aio::MultiplexedConnection;
use redis::cluster_routing::Slot;
use serde_json::Value;
use stocklock::load::engine::Progress;
use stocklock::load::{LoadConfig, Runner};
use stocklock::variants::Variant;
use stocklock::wire::{RunReport, VariantInfo};
use tokio::sync::Barrier;

use crate::helpers::{Stack, alive};

/// Each test's own bound: it fails rather than hangs.
const BOUND: Duration = Duration::from_secs(300);

async fn bounded<T>(body: impl Future<Output = T>) -> T {
    crate::helpers::within(BOUND, body).await
}

/// `stocklock up --cluster` with two instances behind nginx.
async fn cluster_stack() -> Stack {
    let stack = Stack::start_with(2, None, &["--cluster"]).await;
    assert_eq!(stack.cluster.len(), 3, "up announced {:?}", stack.cluster);
    assert_eq!(
        stack.redis_pid, None,
        "a cluster stack starts no lone Redis"
    );
    stack
}

/// Stops the stack (helpers check the instances and nginx) and checks the
/// cluster's nodes went with it.
async fn stop(stack: Stack) {
    let nodes: Vec<u32> = stack.cluster.iter().map(|n| n.pid).collect();
    stack.stop().await;
    for pid in nodes {
        assert!(!alive(pid), "up left cluster node {pid} running");
    }
}

async fn conn(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// The cluster as its nodes see it: which master serves which slots, and a
/// plain connection to each master.
struct Masters {
    /// (first slot, last slot, master URL), from CLUSTER SLOTS.
    ranges: Vec<(u16, u16, String)>,
    conns: BTreeMap<String, MultiplexedConnection>,
    /// For CLUSTER KEYSLOT.
    any: MultiplexedConnection,
}

impl Masters {
    async fn read(stack: &Stack) -> Masters {
        let mut any = conn(&stack.cluster[0].url).await;
        let slots: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async(&mut any)
            .await
            .unwrap();
        let mut ranges = Vec::new();
        for range in slots {
            // [first, last, [ip, port, id, ...], replicas...]
            let first = u16::from_redis_value_ref(&range[0]).unwrap();
            let last = u16::from_redis_value_ref(&range[1]).unwrap();
            let master = Vec::<redis::Value>::from_redis_value_ref(&range[2]).unwrap();
            let ip = String::from_redis_value_ref(&master[0]).unwrap();
            let port = u16::from_redis_value_ref(&master[1]).unwrap();
            assert_eq!(range.len(), 3, "a master has a replica: {range:?}");
            ranges.push((first, last, format!("redis://{ip}:{port}")));
        }
        ranges.sort();
        let covered: u32 = ranges
            .iter()
            .map(|(first, last, _)| u32::from(last - first) + 1)
            .sum();
        assert_eq!(covered, 16384, "slots not all served: {ranges:?}");
        let mut conns = BTreeMap::new();
        for (_, _, url) in &ranges {
            if !conns.contains_key(url) {
                conns.insert(url.clone(), conn(url).await);
            }
        }
        let announced: BTreeSet<&String> = stack.cluster.iter().map(|n| &n.url).collect();
        assert_eq!(
            conns.keys().collect::<BTreeSet<_>>(),
            announced,
            "the masters are the nodes up announced"
        );
        Masters { ranges, conns, any }
    }

    /// The master that serves `key`. The slot the cluster computes for it
    /// is also the one redis-rs routes it by.
    async fn of(&mut self, key: &str) -> String {
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query_async(&mut self.any)
            .await
            .unwrap();
        assert_eq!(Slot::new(slot), Some(Slot::for_key(key)), "slot of {key}");
        self.ranges
            .iter()
            .find(|(first, last, _)| (*first..=*last).contains(&slot))
            .map(|(_, _, url)| url.clone())
            .unwrap_or_else(|| panic!("no master serves slot {slot}"))
    }

    /// `HGET key field` on the master that serves `key`, as a number.
    async fn hget(&mut self, key: &str, field: &str) -> i64 {
        let master = self.of(key).await;
        let value: Option<i64> = redis::cmd("HGET")
            .arg(key)
            .arg(field)
            .query_async(self.conns.get_mut(&master).unwrap())
            .await
            .unwrap_or_else(|err| panic!("HGET {key} on {master}: {err}"));
        value.unwrap_or(0)
    }

    /// `GET key` on the master that serves `key`.
    async fn get(&mut self, key: &str) -> Option<i64> {
        let master = self.of(key).await;
        redis::cmd("GET")
            .arg(key)
            .query_async(self.conns.get_mut(&master).unwrap())
            .await
            .unwrap_or_else(|err| panic!("GET {key} on {master}: {err}"))
    }
}

/// A run like the lab's `race`, on `skus` SKUs (or on `sku` alone).
fn load_config(stack: &Stack, info: &VariantInfo, sku: Option<&str>, skus: usize) -> LoadConfig {
    LoadConfig {
        variants: vec![info.name.clone()],
        sku: sku.map(str::to_owned),
        timeout: Duration::from_secs(60),
        skus,
        ..LoadConfig::new(&stack.url, Some(stack.token.clone()))
    }
}

async fn run(config: &LoadConfig, info: &VariantInfo) -> RunReport {
    let runner = Runner::connect(config.clone()).await.unwrap();
    let report = runner
        .run_variant(info, &Progress::default())
        .await
        .unwrap();
    eprintln!(
        "{:>12} on {}: {} requests in {:.2} s ({:.0}/s): sold {} sold_out {} busy {} errors {} | initial {} remaining {} oversold {} duplicates {} | {}",
        report.variant,
        report.sku,
        report.requests,
        report.elapsed_s,
        report.rps,
        report.sold,
        report.sold_out,
        report.busy,
        report.errors.total(),
        report.initial,
        report.remaining,
        report.oversold,
        report.duplicates,
        report.verdict
    );
    // The client's answers and the ledger agree, and nothing failed.
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    assert_eq!(report.disagreement, None);
    assert_eq!(report.verdict, "SAFE");
    assert_eq!(report.contradiction, None);
    assert_eq!(
        report.sold + report.sold_out + report.busy,
        report.requests,
        "{report:?}"
    );
    report
}

#[tokio::test]
async fn three_masters_keep_safe_variants_safe_over_100_skus() {
    const SKUS: usize = 100;
    const STOCK: i64 = 10;
    const REQUESTS: u64 = 3000;
    bounded(async {
        let stack = cluster_stack().await;
        for node in &stack.cluster {
            let info: String = redis::cmd("CLUSTER")
                .arg("INFO")
                .query_async(&mut conn(&node.url).await)
                .await
                .unwrap();
            for line in [
                "cluster_state:ok",
                "cluster_size:3",
                "cluster_known_nodes:3",
                "cluster_slots_assigned:16384",
            ] {
                assert!(info.contains(line), "{}: no {line} in\n{info}", node.url);
            }
        }
        let mut masters = Masters::read(&stack).await;

        for variant in [Variant::Lua, Variant::Watchdog, Variant::Fenced] {
            let info = variant.info();
            let config = LoadConfig {
                stock: Some(STOCK),
                requests: Some(REQUESTS),
                work_ms: Some(1),
                ..load_config(&stack, &info, None, SKUS)
            };
            let report = run(&config, &info).await;
            assert_eq!(report.requests, REQUESTS);
            assert_eq!(report.busy, 0, "{variant}: nobody should wait 10 s");
            assert_eq!(report.per_sku.len(), SKUS);
            for sku in &report.per_sku {
                assert_eq!(
                    (
                        sku.initial,
                        sku.sold,
                        sku.remaining,
                        sku.oversold,
                        sku.duplicates
                    ),
                    (STOCK, STOCK, 0, 0, 0),
                    "{variant}: {sku:?}"
                );
            }
            let total = STOCK * SKUS as i64;
            assert_eq!(
                (report.initial, report.remaining, report.sold as i64),
                (total, 0, total),
                "{variant}: every SKU sold out, each unit once"
            );
            assert_eq!((report.oversold, report.duplicates), (0, 0));

            // Each master served some of the SKUs, and their sales are in
            // its own keys.
            let mut per_master: BTreeMap<String, usize> =
                masters.conns.keys().map(|url| (url.clone(), 0)).collect();
            for sku in &report.per_sku {
                let master = masters.of(&format!("stock:{{{}}}", sku.sku)).await;
                assert_eq!(
                    masters.of(&format!("ledger:{{{}}}", sku.sku)).await,
                    master,
                    "a SKU's keys share its slot"
                );
                assert_eq!(
                    masters
                        .hget(&format!("ledger:{{{}}}", sku.sku), "sold")
                        .await,
                    STOCK,
                    "{variant}: {} on {master}",
                    sku.sku
                );
                assert_eq!(
                    masters.get(&format!("stock:{{{}}}", sku.sku)).await,
                    Some(0)
                );
                *per_master.get_mut(&master).unwrap() += 1;
            }
            eprintln!("{variant}: SKUs per master {per_master:?}");
            assert!(
                per_master.values().all(|&n| n > 0),
                "{variant}: a master served none of the SKUs: {per_master:?}"
            );
        }

        stop(stack).await;
    })
    .await;
}
