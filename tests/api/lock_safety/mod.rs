//! The correct locks, as a reviewer of distributed locks reads them: a
//! holder knows when it may no longer count on its lock, no error path
//! leaves a lock behind, a holder frozen across a reset sells nothing, an
//! instance is ready only once it can be woken, no client can grow Redis
//! or an instance without bound (`growth.rs`), and fencing tokens are
//! compared only within their source (`fences.rs`).

mod fences;
mod growth;

use std::time::{Duration, Instant};

use serde_json::json;
use stocklock::client::StackClient;

use crate::helpers::{Stack, holder_in_section, redis_conn};

/// Resolves once Redis answers again (a PING waits out a pause).
async fn redis_back(redis_url: &str) {
    let _: String = redis::cmd("PING")
        .query_async(&mut redis_conn(redis_url).await)
        .await
        .unwrap();
}

/// Pauses the stack's Redis for `ms` and returns once the pause is in
/// effect: a PING on a connection made before it goes unanswered.
async fn pause_redis(stack: &Stack, redis_url: &str, ms: u64) {
    let mut probe = redis_conn(redis_url).await;
    stack
        .chaos(json!({"action": "pause_redis", "ms": ms}))
        .await;
    crate::helpers::until_paused(&mut probe).await;
}

/// How long after `since` the SKU's lock key stays: polled every 20 ms (a
/// key's disappearance has no event of its own on a plain connection),
/// failing past `bound`.
async fn lock_gone_within(redis_url: &str, sku: &str, since: Instant, bound: Duration) -> Duration {
    let mut conn = redis_conn(redis_url).await;
    loop {
        let held: bool = redis::cmd("EXISTS")
            .arg(format!("lock:{{{sku}}}"))
            .query_async(&mut conn)
            .await
            .unwrap();
        if !held {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < bound,
            "{sku}: the lock was still there {bound:?} after Redis came back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A holder whose renewals are stuck in a paused Redis for longer than its
/// lease must not write: its local deadline (the acquire's send + lease −
/// drift) passes while the renewal is still unanswered, and it backs off
/// (`lock_lost`) instead of writing after its lease could have run out.
#[tokio::test]
async fn a_holder_whose_renewals_are_stuck_past_its_lease_does_not_write() {
    let stack = Stack::start_with(2, None, &["--chaos"]).await;
    let redis_url = stack.redis_url.clone().unwrap();
    for v in ["watchdog", "fenced"] {
        stack.reset(v, 5).await;
        let holder = holder_in_section(
            &redis_url,
            v,
            stack.client.clone(),
            format!("/deductStock/{v}?sku={v}&lease_ms=2000&work_ms=2500"),
        )
        .await;
        // Renewals (every 667 ms) go into the pause: none is answered before
        // the lease (2 s) is over, yet none fails before the holder's check
        // at 2.5 s either (a renewal waits 1 s for its answer).
        pause_redis(&stack, &redis_url, 3000).await;
        let (status, body) = holder.await.unwrap();
        redis_back(&redis_url).await;
        let state = stack.state(v).await;
        eprintln!("{v}: holder answered {status} {body}; {state:?}");
        assert_eq!(status, 429, "{v}: {body}");
        assert_eq!(body["reason"], "lock_lost", "{v}: {body}");
        assert_eq!((state.sold, state.remaining), (0, 5), "{v}: {state:?}");
    }
    stack.stop().await;
}

/// Error paths of the correct locks leave no lock behind: an acquire whose
/// answer was lost in a paused Redis (it may have taken the lock), and a
/// release whose answer was lost, are both followed by a release by owner
/// token that runs as soon as Redis answers, not by a 30 s lease.
#[tokio::test]
async fn no_error_path_leaves_a_correct_lock_behind() {
    let stack = Stack::start_with(2, None, &["--chaos"]).await;
    let redis_url = stack.redis_url.clone().unwrap();
    let bound = Duration::from_secs(2);
    for v in ["token", "watchdog", "fenced"] {
        // Both instances learn the SKU is stocked first (asked once per SKU),
        // so that the acquire is the first command into the pause.
        stack.reset(v, 5).await;
        for _ in 0..2 {
            let path = format!("/deductStock/{v}?sku={v}");
            assert_eq!(stack.client.get(&path).await.0, 200, "{v}");
        }
        // The acquire is sent into the pause; its answer never comes.
        pause_redis(&stack, &redis_url, 1500).await;
        let (status, body) = stack
            .client
            .get(&format!("/deductStock/{v}?sku={v}&wait_ms=0"))
            .await;
        assert_eq!(status, 503, "{v}: {body}");
        redis_back(&redis_url).await;
        let took = lock_gone_within(&redis_url, v, Instant::now(), bound).await;
        eprintln!("{v}: acquire lost in the pause; lock gone {took:?} after Redis came back");

        // The release is sent into the pause; its answer never comes.
        stack.reset(v, 5).await;
        let holder = holder_in_section(
            &redis_url,
            v,
            stack.client.clone(),
            format!("/deductStock/{v}?sku={v}&work_ms=300"),
        )
        .await;
        pause_redis(&stack, &redis_url, 2500).await;
        let (status, body) = holder.await.unwrap();
        redis_back(&redis_url).await;
        let took = lock_gone_within(&redis_url, v, Instant::now(), bound).await;
        eprintln!(
            "{v}: holder answered {status} {}; release lost in the pause; lock gone {took:?} after",
            body["outcome"]
        );
        let state = stack.state(v).await;
        assert_eq!(state.oversold, 0, "{v}: {state:?}");
    }
    stack.stop().await;
}

/// A fenced holder frozen across a reset: a newer holder sells, the SKU is
/// reset, and the frozen one wakes. The reset forgot the newest token seen
/// (with the rest of the ledger), so the fence admits the frozen token; its
/// write is refused all the same, by the epoch it read the stock in, and
/// sells nothing. The token counter never goes backwards across the reset.
#[tokio::test]
async fn a_fenced_holder_frozen_across_a_reset_is_refused() {
    let stack = Stack::start_with(2, None, &["--chaos"]).await;
    let redis_url = stack.redis_url.clone().unwrap();
    let v = "fenced";
    stack.reset(v, 5).await;
    let fence = || async {
        let token: Option<i64> = redis::cmd("GET")
            .arg(format!("fence:{{{v}}}"))
            .query_async(&mut redis_conn(&redis_url).await)
            .await
            .unwrap();
        token.unwrap_or(0)
    };
    stack
        .chaos(json!({"action": "pause_holder", "ms": 2500}))
        .await;
    let knobs = "lease_ms=300&wait_ms=5000";
    let frozen = holder_in_section(
        &redis_url,
        v,
        stack.client.at(&stack.instances[0].url),
        format!("/deductStock/{v}?sku={v}&{knobs}"),
    )
    .await;
    // A newer holder on the other instance, once the frozen one's lease ran out.
    let (status, newer) = stack
        .client
        .at(&stack.instances[1].url)
        .get(&format!("/deductStock/{v}?sku={v}&{knobs}"))
        .await;
    assert_eq!(status, 200, "{newer}");
    let before_reset = fence().await;
    stack.reset(v, 5).await;
    assert!(
        fence().await >= before_reset,
        "a reset took the token counter back"
    );
    let (status, late) = frozen.await.unwrap();
    assert_eq!(status, 429, "{late}");
    assert_eq!(late["reason"], "reset", "{late}");
    let state = stack.state(v).await;
    assert_eq!(
        (
            state.sold,
            state.remaining,
            state.oversold,
            state.fenced_rejections
        ),
        (0, 5, 0, 0),
        "the new ledger sold nothing and refused nothing by its fence: {state:?}"
    );
    stack.stop().await;
}

/// An instance is ready (`/healthz` 200, the `is ready` line) only once its
/// subscription to lock releases is live: before that it answers 503
/// `starting`, so `up` never puts behind nginx an instance whose early
/// waiters would sleep out a lease for want of a wake-up.
#[tokio::test]
async fn an_instance_is_ready_only_once_it_can_be_woken() {
    use tokio::io::AsyncBufReadExt;

    let port = stocklock::os::free_port().unwrap();
    let mut serve = tokio::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
        .args(["serve", "--listen", "127.0.0.1:0", "--instance", "r"])
        .args(["--redis-url", &format!("redis://127.0.0.1:{port}")])
        .env("STOCKLOCK_ADMIN_TOKEN", "t")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(serve.stdout.take().unwrap()).lines();
    let listening = lines.next_line().await.unwrap().unwrap();
    let url = listening.rsplit(' ').next().unwrap().to_owned();
    assert!(listening.contains("listening on"), "{listening}");

    // No Redis yet: listening, not ready.
    let instance = StackClient::new(&url, None, Duration::from_secs(10)).unwrap();
    let (status, health) = instance.get("/healthz").await;
    assert_eq!((status, health["status"].as_str()), (503, Some("starting")));

    let _redis = stocklock::up::redis::RedisServer::start(Some(port))
        .await
        .unwrap();
    let ready = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("the instance became ready once Redis was there")
        .unwrap()
        .unwrap();
    assert!(ready.contains("is ready"), "{ready}");
    let (status, health) = instance.get("/healthz").await;
    assert_eq!((status, health["status"].as_str()), (200, Some("ok")));
    let _ = serve.kill().await;
}

/// A Redlock holder whose write went into a paused main Redis (its outcome
/// unknown) does not release its lock on the nodes: the write may still
/// land, and a next holder reading the stock before it would sell the same
/// unit. The lease, no longer renewed, frees the lock instead.
#[tokio::test]
async fn a_redlock_holder_whose_write_is_in_doubt_leaves_its_lock_to_the_lease() {
    let stack = Stack::start_with(2, None, &["--chaos"]).await;
    let redis_url = stack.redis_url.clone().unwrap();
    let v = "redlock";
    stack.reset(v, 5).await;
    // One sale first on each instance: the write's script is then known to
    // Redis, so the write sent into the pause runs when Redis wakes (a
    // first EVALSHA would meet NOSCRIPT with nobody waiting to load it).
    for _ in 0..2 {
        let (status, body) = stack.client.get(&format!("/deductStock/{v}?sku={v}")).await;
        assert_eq!(status, 200, "{body}");
    }
    // A second of work: the pause (through nginx and an instance) lands
    // within it even on a loaded machine, and the write sent after it still
    // meets 1.5 s of pause, more than its 1 s timeout.
    let holder = holder_in_section(
        &redis_url,
        v,
        stack.client.clone(),
        format!("/deductStock/{v}?sku={v}&lease_ms=5000&work_ms=1000"),
    )
    .await;
    pause_redis(&stack, &redis_url, 2500).await;
    let (status, body) = holder.await.unwrap();
    assert_eq!(
        (status, body["outcome"].as_str()),
        (503, Some("unknown")),
        "{body}"
    );
    // Answered while the main Redis still sleeps: the nodes still hold it.
    let mut held = 0;
    for node in &stack.redlock_nodes {
        let owner: Option<String> = redis::cmd("GET")
            .arg(format!("lock:{{{v}}}"))
            .query_async(&mut redis_conn(&node.url).await)
            .await
            .unwrap();
        held += usize::from(owner.is_some());
    }
    assert_eq!(
        held, 5,
        "the lock was released while its write was in doubt"
    );
    redis_back(&redis_url).await;
    let state = stack.state(v).await;
    assert_eq!(
        (state.sold, state.remaining, state.oversold),
        (3, 2, 0),
        "the write in doubt did land once Redis woke (the danger was real): {state:?}"
    );
    stack.stop().await;
}
