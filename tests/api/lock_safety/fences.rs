//! Fencing tokens per source: `fenced` (its INCR counter), `etcd`
//! (revisions) and `zookeeper` (czxids) are different clocks, so a token is
//! compared only with tokens of its own source and store, and a reset
//! forgets them all. On real ZooKeeper and etcd, driven in-process.

use stocklock::chaos::Chaos;
use stocklock::lock::LockStoresConfig;
use stocklock::store::Store;
use stocklock::up::etcd::EtcdCluster;

use crate::helpers::{self, InProcess, in_process_config, redlock_on};
use crate::zookeeper::Servers;

/// An instance on `store` whose lock stores are `etcd` and `zookeeper`.
async fn instance_with(
    store: &Store,
    etcd: Option<&EtcdCluster>,
    zookeeper: Option<&Servers>,
) -> InProcess {
    let config = stocklock::http::InstanceConfig {
        chaos: Chaos::off(),
        lock_stores: LockStoresConfig {
            redlock_nodes: redlock_on(store),
            etcd_endpoints: etcd.map(EtcdCluster::urls).unwrap_or_default(),
            zookeeper: zookeeper.map(Servers::connect_string),
        },
        ..in_process_config("f")
    };
    InProcess::listening(store, config).await
}

/// One sale of `variant` on `sku`, which must be sold.
async fn sold(instance: &InProcess, variant: &str, sku: &str) {
    let (status, body) = instance
        .get(&format!("/deductStock/{variant}?sku={sku}"))
        .await;
    assert_eq!(status, 200, "{variant} on {sku}: {body}");
}

/// The reproduction, for both stores: reset, two sales through
/// the store's lock (tokens far above `fenced`'s counter), reset again;
/// `fenced` must still sell, and its tokens must still be compared with
/// each other (a refusal counted as before).
#[tokio::test]
async fn a_store_lock_never_locks_fenced_out_of_a_sku() {
    let Some(mut etcd) = crate::etcd::one_member().await else {
        return;
    };
    let Some(zookeeper) = Servers::start(1).await else {
        etcd.stop().await;
        return;
    };
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let instance = instance_with(&store, Some(&etcd), Some(&zookeeper)).await;
    for source in ["zookeeper", "etcd"] {
        let sku = format!("m1-{source}");
        instance.reset(&sku, 10, 0).await;
        sold(&instance, source, &sku).await;
        sold(&instance, source, &sku).await;
        instance.reset(&sku, 10, 0).await;
        sold(&instance, "fenced", &sku).await;
        // Without a reset between them either: each source keeps its own.
        sold(&instance, source, &sku).await;
        sold(&instance, "fenced", &sku).await;
        let state = instance.state(&sku).await;
        assert_eq!(
            (state.sold, state.remaining, state.fenced_rejections),
            (3, 7, 0),
            "{source}: {state:?}"
        );
        // A `fenced` token is still refused by a newer one of its own
        // counter (one far ahead, as a newer holder's), and counted; the
        // other source sells on.
        let _: () = redis::cmd("HSET")
            .arg(format!("ledger:{{{sku}}}"))
            .arg("fence_seen:fenced")
            .arg(i64::MAX)
            .query_async(&mut helpers::redis_conn(&redis.url()).await)
            .await
            .unwrap();
        let (status, body) = instance
            .get(&format!("/deductStock/fenced?sku={sku}"))
            .await;
        assert_eq!(
            (status.as_u16(), body["reason"].as_str()),
            (429, Some("stale_token")),
            "{body}"
        );
        sold(&instance, source, &sku).await;
        let state = instance.state(&sku).await;
        assert_eq!(
            (state.sold, state.remaining, state.fenced_rejections),
            (4, 6, 1),
            "{source}: {state:?}"
        );
    }
    etcd.stop().await;
    zookeeper.stop().await;
}

/// A fresh etcd cluster against an old Redis: its revisions start again
/// from 1, below what the SKU saw from the old cluster, and must not be
/// refused for it (the store's identity is part of the source).
#[tokio::test]
async fn a_fresh_etcd_against_an_old_redis_starts_clean() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let sku = "fresh-etcd";
    let Some(mut old) = crate::etcd::one_member().await else {
        return;
    };
    let instance = instance_with(&store, Some(&old), None).await;
    instance.reset(sku, 10, 0).await;
    for _ in 0..5 {
        sold(&instance, "etcd", sku).await;
    }
    old.stop().await;
    let Some(mut fresh) = crate::etcd::one_member().await else {
        return;
    };
    let instance = instance_with(&store, Some(&fresh), None).await;
    sold(&instance, "etcd", sku).await;
    let state = instance.state(sku).await;
    assert_eq!(
        (state.sold, state.remaining, state.fenced_rejections),
        (6, 4, 0),
        "{state:?}"
    );
    fresh.stop().await;
}

/// A fresh ZooKeeper against an old Redis: its zxids start again, below
/// the czxids the SKU saw from the old server, and must not be refused for
/// them (the ensemble's id is part of the source).
#[tokio::test]
async fn a_fresh_zookeeper_against_an_old_redis_starts_clean() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let sku = "fresh-zookeeper";
    let Some(old) = Servers::start(1).await else {
        return;
    };
    let instance = instance_with(&store, None, Some(&old)).await;
    instance.reset(sku, 10, 0).await;
    for _ in 0..5 {
        sold(&instance, "zookeeper", sku).await;
    }
    old.stop().await;
    let Some(fresh) = Servers::start(1).await else {
        return;
    };
    let instance = instance_with(&store, None, Some(&fresh)).await;
    sold(&instance, "zookeeper", sku).await;
    let state = instance.state(sku).await;
    assert_eq!(
        (state.sold, state.remaining, state.fenced_rejections),
        (6, 4, 0),
        "{state:?}"
    );
    fresh.stop().await;
}
