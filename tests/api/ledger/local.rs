//! Answers an instance counts itself (sold-out marks, the scripted
//! variants' answers without a request id) reach the ledger before a state
//! read that comes after them, even while another count of the same
//! instance is already on its way to Redis, and once only when a count
//! timed out and was sent again.

use std::time::Duration;

use stocklock::http::{AppState, app};
use stocklock::lock::Wakeups;
use stocklock::store::Store;
use stocklock::up::redis::RedisServer;

use crate::helpers::{self, InProcess, in_process_config, redis_conn};

/// How long Redis holds every write back.
const PAUSE: Duration = Duration::from_millis(500);

/// An in-process instance `a` on a Redis of its own that sold three
/// units of `sku` (answers it counts itself: no request id), after which
/// Redis holds every write back for `pause` (reads still pass).
async fn three_answers_then_writes_held(
    sku: &str,
    pause: Duration,
) -> (RedisServer, AppState, InProcess) {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let state = AppState::new(store, in_process_config("a"), Wakeups::new());
    let a = InProcess(app(state.clone()));
    a.reset(sku, 10, 0).await;
    for _ in 0..3 {
        let (status, body) = a.get(&format!("/deductStock/lua?sku={sku}")).await;
        assert_eq!(status, 200, "{body}");
    }
    let mut conn = redis_conn(&redis.url()).await;
    redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(pause.as_millis() as u64)
        .arg("WRITE")
        .query_async::<()>(&mut conn)
        .await
        .unwrap();
    (redis, state, a)
}

#[tokio::test]
async fn a_count_returns_only_once_the_answers_counted_before_it_are_in_redis() {
    let (_redis, state, a) = three_answers_then_writes_held("local", PAUSE).await;
    // A first count (the one an instance runs every second) takes the
    // three answers and waits for its write. The test's runtime has one
    // thread: yielding lets it run exactly up to that wait.
    let seller = state.seller().clone();
    let first = tokio::spawn(async move { seller.flush_local().await });
    tokio::task::yield_now().await;
    assert!(
        !first.is_finished(),
        "the first count did not wait for Redis: the test proves nothing"
    );

    // A second count, as a state read starts one: once it returns, the
    // answers given before it must be in the ledger.
    state.seller().flush_local().await;
    assert!(
        first.is_finished(),
        "the second count returned while the answers the first one took were still on their way to Redis"
    );
    let counted = a.state("local").await;
    assert_eq!(
        counted.per_instance.get("a"),
        Some(&3),
        "the state read after both counts: {counted:?}"
    );
}

/// A count-in whose answer never came (Redis held it past the second an
/// instance waits) may still run once Redis lets it; sent again, it must
/// not count twice.
#[tokio::test]
async fn a_count_in_held_past_its_timeout_and_sent_again_counts_once() {
    // Redis holds writes back for longer than an instance waits (1 s):
    // the count-in times out, and runs when the pause ends.
    let (redis, state, a) =
        three_answers_then_writes_held("held", Duration::from_millis(2500)).await;
    state.seller().flush_local().await;
    // A write held after the instance's runs after it: once it is
    // answered (on a connection that waits as long as it takes), the
    // instance's held write has run.
    let patient = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    let mut waits = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection_with_config(&patient)
        .await
        .unwrap();
    let _: i64 = redis::cmd("INCR")
        .arg("after-the-pause")
        .query_async(&mut waits)
        .await
        .unwrap();
    state.seller().flush_local().await;
    let counted = a.state("held").await;
    assert_eq!(
        counted.per_instance.get("a"),
        Some(&3),
        "three answers, counted in once: {counted:?}"
    );
}
