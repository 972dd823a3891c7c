//! One instance driven in-process (`oneshot`, no socket) against a real
//! Redis, answering what users send: a sale in every variant (and sold
//! out), busy behind a held lock, a 503 while Redis is dead and sales again
//! once it is back (and a store's first command after its Redis came back
//! answered), a watchdog holder that lost its lock backing off, and
//! `redlock` without its nodes saying so. Bad input is in `bad_input.rs`.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use stocklock::chaos::Chaos;
use stocklock::store::Store;
use stocklock::up::redis::RedisServer;

use crate::helpers::{self, InProcess};

#[tokio::test]
async fn every_variant_sells_one_unit_in_process() {
    let redis = helpers::redis().await;
    let instance = InProcess::start(&Store::open(&redis.url()).unwrap(), "t", Chaos::off()).await;
    // Without their store, etcd and zookeeper say what is missing and sell nothing.
    for (variant, flag) in [("etcd", "--etcd-endpoints"), ("zookeeper", "--zookeeper")] {
        instance.reset(variant, 1, 0).await;
        let (status, body) = instance
            .get(&format!("/deductStock/{variant}?sku={variant}"))
            .await;
        assert_eq!(status, 503, "{variant}: {body}");
        assert_eq!(body["error"], "not_configured", "{variant}: {body}");
        assert!(body["detail"].as_str().unwrap().contains(flag), "{body}");
        assert_eq!(instance.state(variant).await.remaining, 1);
    }
    for variant in crate::helpers::in_process_variants() {
        let sku = format!("one-{}", variant.name());
        instance.reset(&sku, 1, 0).await;
        let (status, body) = instance
            .get(&format!("/deductStock/{variant}?sku={sku}"))
            .await;
        assert_eq!(status, 200, "{variant}: {body}");
        assert_eq!(body["outcome"], "sold");
        assert_eq!(body["unit"], 1);
        assert_eq!(body["remaining"], 0);
        assert_eq!(body["variant"], variant.name());
        assert_eq!(body["instance"], "t");
        let (status, body) = instance
            .get(&format!("/deductStock/{variant}?sku={sku}"))
            .await;
        assert_eq!(status, 409, "{variant}: {body}");
        assert_eq!(body["outcome"], "sold_out");
        let state = instance.state(&sku).await;
        assert_eq!(
            (state.sold, state.remaining, state.oversold),
            (1, 0, 0),
            "{variant}"
        );
        assert_eq!(state.per_instance.get("t"), Some(&2));
        assert!(!state.lock.held, "{variant}");
    }
    // The default variant.
    instance.reset("00001", 3, 0).await;
    let (status, body) = instance.get("/deductStock").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["variant"], "lua");
    assert_eq!(body["sku"], "00001");
    let (status, body) = instance
        .call(
            Request::post("/deductStock/token")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(status, 200, "POST: {body}");
}

#[tokio::test]
async fn a_held_lock_answers_busy_and_a_lock_without_ttl_shows_in_the_state() {
    let redis = helpers::redis().await;
    let instance = InProcess::start(&Store::open(&redis.url()).unwrap(), "t", Chaos::off()).await;
    instance.reset("b1", 5, 0).await;
    // Someone else holds the lock, with no expiry at all (SETNX's orphan).
    let store = Store::open(&redis.url()).unwrap();
    let mut conn = store.conn().await.unwrap();
    let _: () = redis::cmd("SET")
        .arg("lock:{b1}")
        .arg("1")
        .query_async(&mut conn)
        .await
        .unwrap();
    for variant in ["setnx", "token"] {
        let (status, body) = instance
            .get(&format!("/deductStock/{variant}?sku=b1"))
            .await;
        assert_eq!(status, 429, "{variant}: {body}");
        assert_eq!(body["outcome"], "busy");
        assert_eq!(body["reason"], "lock_held");
    }
    let (status, body) = instance
        .get("/deductStock/watchdog?sku=b1&wait_ms=50")
        .await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["reason"], "wait_timed_out");
    let state = instance.state("b1").await;
    assert_eq!(state.busy, 3);
    assert!(state.lock.held && state.lock.no_ttl, "{:?}", state.lock);
    assert_eq!(state.lock.holder.as_deref(), Some("1"));
    assert_eq!(state.remaining, 5);
}

#[tokio::test]
async fn a_dead_redis_is_a_503_and_service_resumes_when_it_is_back() {
    let mut redis = helpers::redis().await;
    let port = redis.port();
    let instance = InProcess::start(&Store::open(&redis.url()).unwrap(), "t", Chaos::off()).await;
    instance.reset("r1", 100, 0).await;
    let (status, _) = instance.get("/deductStock/watchdog?sku=r1").await;
    assert_eq!(status, 200);

    redis.stop().await;
    // The first command after Redis died may go out on the dead socket: for
    // `lua` that command is its write, so all it can honestly say is that
    // the outcome is unknown. Once the connection is known to be refused,
    // nothing is sent and the answer is that nothing was sold.
    let (status, body) = instance.get("/deductStock/lua?sku=r1").await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body["error"] == "store_unavailable" || body["outcome"] == "unknown",
        "{body}"
    );
    for uri in [
        "/deductStock/watchdog?sku=r1",
        "/deductStock/token?sku=r1",
        "/deductStock/lua?sku=r1",
        "/api/state?sku=r1",
    ] {
        let (status, body) = instance.get(uri).await;
        assert_eq!(status, 503, "{uri}: {body}");
        assert_eq!(body["error"], "store_unavailable", "{uri}: {body}");
        assert!(
            body["detail"]
                .as_str()
                .unwrap()
                .contains("nothing was sold"),
            "{body}"
        );
    }
    let (status, _) = instance.get("/healthz").await;
    assert_eq!(status, 200, "healthz must not depend on Redis");

    // Redis comes back (empty: persistence is off) on the same port.
    let _redis = RedisServer::start(Some(port)).await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (status, body) = instance.get("/api/state?sku=r1").await;
        if status == 200 {
            break;
        }
        assert_eq!(status, 503, "{body}");
        assert!(
            std::time::Instant::now() < deadline,
            "did not recover within 10 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    instance.reset("r1", 2, 0).await;
    for variant in ["lua", "watchdog"] {
        let (status, body) = instance
            .get(&format!("/deductStock/{variant}?sku=r1"))
            .await;
        assert_eq!(status, 200, "{variant}: {body}");
    }
}

/// A store whose Redis restarted answers its first command once Redis is
/// back. While Redis was down, the connection manager tried to reconnect
/// and failed, and it hands that failure to the next command before it
/// tries again: CI's lab once lost `redis-data-loss` that way ("Connection
/// refused" on its first look at the order stream). A refused connection
/// sent nothing, so the store sends that command once more.
#[tokio::test]
async fn a_store_answers_its_first_command_after_its_redis_came_back() {
    let mut redis = helpers::redis().await;
    let port = redis.port();
    let store = Store::open(&redis.url()).unwrap();
    let conn = store.conn().await.unwrap();
    let ping = |mut conn: stocklock::store::Conn| async move {
        redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .map_err(|err| (err.is_connection_refusal(), err.to_string()))
    };
    assert_eq!(ping(conn.clone()).await, Ok("PONG".to_owned()));

    redis.stop().await;
    // The first command may still go out on the old connection before the
    // manager has seen it close ("broken pipe"); it fails either way, and
    // the failure makes the manager reconnect. The next one finds Redis
    // gone: refused, and refused again when the store sends it once more.
    let first = ping(conn.clone()).await;
    assert!(first.is_err(), "answered while down: {first:?}");
    let down = ping(conn.clone()).await;
    assert!(
        matches!(down, Err((true, _))),
        "refused while down: {down:?}"
    );
    // Down a while, as a restarted Redis is: longer than the manager's
    // reconnection tries (one retry 50 ms after the first); nothing tells
    // when it gave up.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let _redis = RedisServer::start(Some(port)).await.unwrap();
    assert_eq!(ping(conn).await, Ok("PONG".to_owned()));
}

/// The watchdog learns that its lock vanished (a failover, a clock jump)
/// and the holder backs off before its write: busy `lock_lost`, counted in
/// the ledger, stock untouched.
#[tokio::test]
async fn a_watchdog_holder_that_lost_its_lock_does_not_write() {
    use futures_util::StreamExt;

    let redis = helpers::redis().await;
    let instance = InProcess::start(&Store::open(&redis.url()).unwrap(), "t", Chaos::off()).await;
    instance.reset("w1", 5, 0).await;
    let store = Store::open(&redis.url()).unwrap();
    let mut conn = store.conn().await.unwrap();
    let mut events = helpers::keyspace_events(&redis.url(), "lock:{w1}").await;

    let request = {
        let instance = instance.clone();
        tokio::spawn(async move {
            instance
                .get("/deductStock/watchdog?sku=w1&lease_ms=300&work_ms=1500")
                .await
        })
    };
    // The holder's HINCRBY is the event: it holds the lock now.
    let event = tokio::time::timeout(std::time::Duration::from_secs(5), events.next())
        .await
        .expect("the lock was never taken")
        .unwrap();
    assert_eq!(event.get_payload::<String>().unwrap(), "hincrby");
    let deleted: i64 = redis::cmd("DEL")
        .arg("lock:{w1}")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(deleted, 1);

    let (status, body) = request.await.unwrap();
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["reason"], "lock_lost");
    let state = instance.state("w1").await;
    assert_eq!(
        (state.lost_locks, state.busy, state.sold, state.remaining),
        (1, 1, 0, 5),
        "{state:?}"
    );
}

/// An instance started without `--redlock-nodes` says so for `redlock`
/// (503, naming the flag) and changes nothing; the other variants still sell.
#[tokio::test]
async fn redlock_without_nodes_is_a_clear_503() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let instance = InProcess::with(
        &store,
        stocklock::lock::Wakeups::new(),
        helpers::in_process_config("t"),
    );
    instance.reset("r", 3, 0).await;
    let before = instance.state("r").await;
    let (status, body) = instance.get("/deductStock/redlock?sku=r").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"], "not_configured");
    assert!(
        body["detail"].as_str().unwrap().contains("--redlock-nodes"),
        "{body}"
    );
    assert_eq!(
        instance.state("r").await,
        before,
        "a refused request changed the SKU"
    );
    let (status, body) = instance.get("/deductStock/token?sku=r").await;
    assert_eq!(status, StatusCode::OK, "{body}");
}
