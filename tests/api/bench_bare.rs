//! `GET /bench/bare`, the bench's baseline: absent unless the instance is
//! started for it; with it, one bare decrement on keys of its own (never
//! a SKU's stock or ledger), refusing bad input with a 400 and answering
//! 503 while Redis is away.

use stocklock::chaos::Chaos;
use stocklock::store::Store;

use crate::helpers::{self, InProcess};

/// An in-process instance on `store`, started with `--bench-bare` or not.
async fn instance(store: &Store, bench_bare: bool) -> InProcess {
    InProcess::listening(
        store,
        stocklock::http::InstanceConfig {
            bench_bare,
            chaos: Chaos::off(),
            ..helpers::in_process_config("t")
        },
    )
    .await
}

#[tokio::test]
async fn without_the_flag_the_bare_route_is_not_there() {
    let redis = helpers::redis().await;
    let plain = instance(&Store::open(&redis.url()).unwrap(), false).await;
    let (status, body) = plain.get("/bench/bare?sku=b").await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"], "not_found", "{body}");
}

#[tokio::test]
async fn the_bare_route_decrements_its_own_key_and_never_a_skus_stock() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let bare = instance(&store, true).await;
    bare.reset("b", 5, 0).await;
    for left in [-1, -2, -3] {
        let (status, body) = bare.get("/bench/bare?sku=b").await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body, serde_json::json!({ "left": left }));
    }
    // No sku: the default SKU's name, still on the bare keys.
    let (status, body) = bare.get("/bench/bare").await;
    assert_eq!((status.as_u16(), body["left"].as_i64()), (200, Some(-1)));

    let mut conn = helpers::redis_conn(&redis.url()).await;
    let counter: i64 = redis::cmd("GET")
        .arg("bench_bare:{b}")
        .query_async(&mut conn)
        .await
        .unwrap();
    let calls: i64 = redis::cmd("HGET")
        .arg("bench_bare_count:{b}")
        .arg("calls")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!((counter, calls), (-3, 3));
    // The SKU called b is as its reset left it.
    let state = helpers::intact(bare.state("b").await);
    assert_eq!((state.remaining, state.sold), (5, 0), "{state:?}");
}

#[tokio::test]
async fn bad_input_to_the_bare_route_is_a_400_and_a_dead_redis_a_503() {
    let mut redis = helpers::redis().await;
    let bare = instance(&Store::open(&redis.url()).unwrap(), true).await;
    for (uri, field) in [
        ("/bench/bare?sku=no%20spaces", "sku"),
        ("/bench/bare?sku=a&sku=b", "sku"),
        ("/bench/bare?sku=a&work_ms=5", "\"work_ms\""),
    ] {
        let (status, body) = bare.get(uri).await;
        assert_eq!(status, 400, "{uri}: {body}");
        assert!(
            body["detail"].as_str().unwrap().starts_with(field),
            "{uri}: {body}"
        );
    }
    redis.stop().await;
    for _ in 0..2 {
        let (status, body) = bare.get("/bench/bare?sku=b").await;
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["error"], "store_unavailable", "{body}");
    }
}
