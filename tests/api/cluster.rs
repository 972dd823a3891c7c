//! A local 3-master Redis Cluster, started by the real `stocklock up
//! --cluster`: the variants that are safe on one Redis stay safe with their
//! SKUs spread over the three masters, and `lua-sharded` sells a hot SKU's
//! stock exactly, its buckets spread over the masters and its retries
//! answered once. The keys are looked up on the masters themselves, over
//! plain (non-cluster) connections: a key a master does not own is an
//! error there, so finding it proves where it lives.

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
    tokio::time::timeout(BOUND, body)
        .await
        .unwrap_or_else(|_| panic!("the test did not finish within {BOUND:?}"))
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

#[tokio::test]
async fn lua_sharded_sells_exactly_a_hot_skus_stock_from_buckets_on_several_masters() {
    const STOCK: i64 = 1000;
    const BUCKETS: u32 = 8;
    const REQUESTS: u64 = 1500;
    bounded(async {
        let stack = cluster_stack().await;
        let reset = stack.client.reset("hot", STOCK, BUCKETS).await.unwrap();
        assert_eq!(
            (reset.buckets, reset.initial, reset.remaining, reset.sold),
            (BUCKETS, STOCK, STOCK, 0)
        );

        let info = Variant::LuaSharded.info();
        let config = LoadConfig {
            requests: Some(REQUESTS),
            ..load_config(&stack, &info, Some("hot"), 1)
        };
        let report = run(&config, &info).await;
        assert_eq!(
            (report.sold, report.sold_out, report.busy),
            (STOCK as u64, REQUESTS - STOCK as u64, 0),
            "the client's 200s are the stock, no more, no less"
        );

        let state = stack.client.state("hot").await.unwrap();
        assert_eq!(
            (state.buckets, state.initial, state.sold, state.remaining),
            (BUCKETS, STOCK, STOCK, 0),
            "{state:?}"
        );
        assert_eq!((state.oversold, state.duplicates), (0, 0), "{state:?}");
        assert_eq!(
            state.per_instance.values().sum::<i64>(),
            REQUESTS as i64,
            "every answer recorded once: {:?}",
            state.per_instance
        );
        assert_eq!(state.per_instance.len(), 2, "{:?}", state.per_instance);

        // Each bucket, on its own master, sold exactly its share.
        let mut masters = Masters::read(&stack).await;
        let mut per_master: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for b in 0..BUCKETS {
            let (stock, ledger) = (format!("stock:{{hot#{b}}}"), format!("ledger:{{hot#{b}}}"));
            let master = masters.of(&stock).await;
            assert_eq!(masters.of(&ledger).await, master);
            let share = STOCK / i64::from(BUCKETS);
            assert_eq!(masters.hget(&ledger, "initial").await, share, "bucket {b}");
            assert_eq!(masters.hget(&ledger, "sold").await, share, "bucket {b}");
            assert_eq!(masters.get(&stock).await, Some(0), "bucket {b}");
            per_master.entry(master).or_default().push(b);
        }
        eprintln!("lua-sharded: buckets per master {per_master:?}");
        assert!(
            per_master.len() >= 2,
            "all eight buckets on one master: {per_master:?}"
        );

        stop(stack).await;
    })
    .await;
}

/// The bucket `lua-sharded` tries first for a request_id: FNV-1a of the id
/// modulo the buckets (as the variant computes it).
fn first_bucket(request_id: &str, buckets: u32) -> u32 {
    let hash = request_id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (hash % u64::from(buckets)) as u32
}

/// `copies` identical requests with one request_id, released at once.
async fn same_request(
    stack: &Stack,
    sku: &str,
    request_id: &str,
    copies: usize,
) -> Vec<(u16, Value)> {
    let url = stack.client.url(&format!(
        "/deductStock/lua-sharded?sku={sku}&request_id={request_id}"
    ));
    let barrier = Arc::new(Barrier::new(copies));
    let sends: Vec<_> = (0..copies)
        .map(|_| {
            let (http, url, barrier) = (stack.http().clone(), url.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let response = http.get(&url).send().await.expect("request failed");
                let status = response.status().as_u16();
                (status, response.json::<Value>().await.expect("a JSON body"))
            })
        })
        .collect();
    let mut answers = Vec::new();
    for send in sends {
        answers.push(send.await.unwrap());
    }
    answers
}

/// Checks that `answers` are one first answer and its replays, all with
/// `status`; returns the unit sold (`None` for sold out).
fn one_answer_repeated(answers: &[(u16, Value)], status: u16) -> Option<i64> {
    for (got, body) in answers {
        assert_eq!(*got, status, "{body}");
    }
    let firsts = answers
        .iter()
        .filter(|(_, body)| body.get("replayed").and_then(Value::as_bool) != Some(true))
        .count();
    assert_eq!(firsts, 1, "one first answer, the rest replays: {answers:?}");
    let units: BTreeSet<Option<i64>> = answers.iter().map(|(_, b)| b["unit"].as_i64()).collect();
    assert_eq!(units.len(), 1, "every copy names the same unit: {units:?}");
    units.into_iter().next().flatten()
}

#[tokio::test]
async fn lua_sharded_answers_a_request_id_once_even_when_it_must_walk_the_buckets() {
    const COPIES: usize = 16;
    const BUCKETS: u32 = 8;
    bounded(async {
        let stack = cluster_stack().await;

        // Stock in every bucket.
        stack.client.reset("hot2", 1000, BUCKETS).await.unwrap();
        let answers = same_request(&stack, "hot2", "x", COPIES).await;
        assert!(one_answer_repeated(&answers, 200).is_some());
        let state = stack.client.state("hot2").await.unwrap();
        assert_eq!(
            (
                state.sold,
                state.replays,
                state.remaining,
                state.oversold,
                state.duplicates
            ),
            (1, COPIES as i64 - 1, 999, 0, 0),
            "{state:?}"
        );

        // 2 units over 8 buckets: buckets 0 and 1 hold one each, 2..7
        // none. Ids that start at an empty bucket walk up to six empty ones.
        stack.client.reset("hot3", 2, BUCKETS).await.unwrap();
        let ids: Vec<String> = (0..)
            .map(|n| format!("walk-{n}"))
            .filter(|id| first_bucket(id, BUCKETS) == 2)
            .take(3)
            .collect();
        let mut units = Vec::new();
        for (i, id) in ids[..2].iter().enumerate() {
            let answers = same_request(&stack, "hot3", id, COPIES).await;
            let unit = one_answer_repeated(&answers, 200).expect("a sale names its unit");
            units.push(unit);
            let state = stack.client.state("hot3").await.unwrap();
            let sold = i as i64 + 1;
            assert_eq!(
                (
                    state.sold,
                    state.replays,
                    state.remaining,
                    state.oversold,
                    state.duplicates
                ),
                (sold, sold * (COPIES as i64 - 1), 2 - sold, 0, 0),
                "after {id}: {state:?}"
            );
        }
        // Bucket b's only unit is unit b + 1 of the SKU: starting at
        // bucket 2, the first id walked 2..7 and sold bucket 0's, the
        // second walked on to bucket 1.
        assert_eq!(units, [1, 2]);
        // Sold out everywhere: the answer is a 409, given once and repeated.
        let answers = same_request(&stack, "hot3", &ids[2], COPIES).await;
        assert_eq!(one_answer_repeated(&answers, 409), None);
        let state = stack.client.state("hot3").await.unwrap();
        assert_eq!(
            (
                state.sold,
                state.replays,
                state.remaining,
                state.oversold,
                state.duplicates
            ),
            (2, 3 * (COPIES as i64 - 1), 0, 0, 0),
            "{state:?}"
        );
        assert_eq!(
            state.per_instance.values().sum::<i64>(),
            3 * COPIES as i64,
            "every answer recorded once: {:?}",
            state.per_instance
        );

        stop(stack).await;
    })
    .await;
}
