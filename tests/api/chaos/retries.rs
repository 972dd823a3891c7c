//! A retried request sells once: a request id retried one after another
//! or in a storm, and under a bucket count changed by another instance.

use serde_json::Value;
use stocklock::chaos::Chaos;
use stocklock::store::Store;

use crate::helpers::{self, InProcess};

/// A retried request with the same id gets its first answer again and
/// never sells twice, in every variant.
#[tokio::test]
async fn a_retried_request_id_never_sells_twice() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let instance = InProcess::start(&store, "t", Chaos::on(0)).await;
    for variant in crate::helpers::in_process_variants() {
        let sku = variant.name();
        instance.reset(sku, 3, 0).await;
        let uri = format!("/deductStock/{sku}?sku={sku}&request_id=order-1");
        let (status, first) = instance.get(&uri).await;
        assert_eq!(status, 200, "{variant}: {first}");
        for _ in 0..5 {
            let (status, again) = instance.get(&uri).await;
            assert_eq!(status, 200, "{variant}: {again}");
            assert_eq!(again["unit"], first["unit"], "{variant}");
            assert_eq!(again["remaining"], first["remaining"], "{variant}");
            assert_eq!(again["replayed"], true, "{variant}");
        }
        let (status, other) = instance
            .get(&format!("/deductStock/{sku}?sku={sku}&request_id=order-2"))
            .await;
        assert_eq!(status, 200, "{variant}: {other}");
        assert_ne!(other["unit"], first["unit"]);
        let state = instance.state(sku).await;
        assert_eq!(
            (state.sold, state.remaining, state.replays),
            (2, 1, 5),
            "{variant}: {state:?}"
        );
    }
}

/// A storm of concurrent retries of one request: exactly one sale, in every
/// variant, even `none` (the id is claimed atomically before the section).
#[tokio::test]
async fn a_retry_storm_sells_once_in_every_variant() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let instance = InProcess::start(&store, "t", Chaos::on(0)).await;
    for variant in crate::helpers::in_process_variants() {
        let sku = variant.name();
        instance.reset(sku, 3, 0).await;
        let uri = format!("/deductStock/{sku}?sku={sku}&request_id=storm&work_ms=20&wait_ms=5000");
        let storm: Vec<_> = (0..16)
            .map(|_| {
                let (instance, uri) = (instance.clone(), uri.clone());
                tokio::spawn(async move { instance.get(&uri).await })
            })
            .collect();
        let mut first_sales = 0;
        for retry in storm {
            let (status, body) = retry.await.unwrap();
            match status.as_u16() {
                200 if body["replayed"] != true => first_sales += 1,
                200 => assert_eq!(body["unit"], 3, "{variant}: a replay repeats the one sale"),
                429 => assert_eq!(body["reason"], "in_progress", "{variant}: {body}"),
                _ => panic!("{variant}: {status} {body}"),
            }
        }
        let state = instance.state(sku).await;
        assert_eq!(first_sales, 1, "{variant}");
        assert_eq!(
            (state.sold, state.remaining, state.oversold),
            (1, 2, 0),
            "{variant}: {state:?}"
        );
    }
}

/// A reset on one instance changes a SKU's bucket count under another
/// instance that still believes the old one: its scripts are told so before
/// they read or record anything, so a retry is still answered once, every
/// unit is sold once, and the SKU sells exactly its stock.
#[tokio::test]
async fn lua_sharded_survives_a_bucket_count_changed_by_another_instance() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let a = InProcess::start(&store, "a", Chaos::off()).await;
    let b = InProcess::start(&store, "b", Chaos::off()).await;
    let buy = |instance: InProcess, id: String| async move {
        let (status, body) = instance
            .get(&format!("/deductStock/lua-sharded?sku=hot&request_id={id}"))
            .await;
        (status.as_u16(), body)
    };

    // a learns "not split"; b splits the SKU into 4 buckets behind its back.
    a.reset("hot", 12, 0).await;
    assert_eq!(buy(a.clone(), "r0".into()).await.0, 200);
    b.reset("hot", 12, 4).await;
    let (status, first) = buy(a.clone(), "r1".into()).await;
    assert_eq!(
        status, 200,
        "a must find the buckets, not the emptied key: {first}"
    );
    let (status, again) = buy(b.clone(), "r1".into()).await;
    assert_eq!(
        (status, &again["replayed"]),
        (200, &Value::Bool(true)),
        "{again}"
    );
    assert_eq!(again["unit"], first["unit"]);

    // a now believes 4; b re-splits into 3. a must not sell from the old layout.
    b.reset("hot", 12, 3).await;
    let mut units = std::collections::BTreeSet::new();
    for i in 0..20 {
        let instance = if i % 2 == 0 { a.clone() } else { b.clone() };
        let (status, body) = buy(instance, format!("s{i}")).await;
        if status == 200 {
            assert!(
                units.insert(body["unit"].as_i64().unwrap()),
                "unit sold twice: {body}"
            );
        } else {
            assert_eq!(status, 409, "{body}");
        }
    }
    assert_eq!(units.len(), 12, "exactly the stock: {units:?}");
    let state = a.state("hot").await;
    assert_eq!(state.buckets, 3);
    assert_eq!(
        (
            state.sold,
            state.remaining,
            state.oversold,
            state.duplicates
        ),
        (12, 0, 0, 0),
        "{state:?}"
    );
}
