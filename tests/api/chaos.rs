//! The failure modes of the articles, made deterministic by the fault
//! knobs: a lease shorter than the work, a crash between SETNX and EXPIRE, a
//! stop-the-world pause longer than the lease, a retried request.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;
use stocklock::chaos::Chaos;
use stocklock::knobs::Sku;
use stocklock::store::{Keys, Store};

use crate::helpers::{self, InProcess, Stack};

/// Work (600 ms) longer than the lease (200 ms), three buyers waiting for
/// the lock: a lease-only lock hands the lock to the next buyer while the
/// first still works, and both write. A renewed lock does not.
#[tokio::test]
async fn work_longer_than_the_lease_oversells_exactly_the_locks_without_renewal() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let instance = InProcess::start(&store, "t", Chaos::on(0)).await;
    let mut conn = store.conn().await.unwrap();
    let cases = [
        ("token", true),
        ("setnx", true),
        ("setnx-expiry", true),
        ("watchdog", false),
        ("fenced", false),
        ("lua", false),
    ];
    for (variant, oversells) in cases {
        instance.reset(variant, 5, 0).await;
        let uri =
            format!("/deductStock/{variant}?sku={variant}&lease_ms=200&work_ms=600&wait_ms=5000");
        let buyers: Vec<_> = (0..3)
            .map(|_| {
                let (instance, uri) = (instance.clone(), uri.clone());
                tokio::spawn(async move { instance.get(&uri).await })
            })
            .collect();
        for buyer in buyers {
            let (status, body) = buyer.await.unwrap();
            assert_eq!(status, 200, "{variant}: {body}");
        }
        let state = instance.state(variant).await;
        let sections =
            stocklock::timeline::sections(&mut conn, &Keys::new(&Sku::parse(variant).unwrap()))
                .await
                .unwrap();
        let overlaps = stocklock::timeline::overlaps(&sections, usize::MAX);
        eprintln!(
            "{variant:>12}: oversold {} duplicates {} overlapping sections {}",
            state.oversold,
            state.duplicates,
            overlaps.len()
        );
        if oversells {
            assert!(state.oversold > 0, "{variant} should oversell: {state:?}");
            assert!(
                !overlaps.is_empty(),
                "{variant}: the witness saw no two holders at once"
            );
        } else {
            assert_eq!(
                (state.oversold, state.duplicates),
                (0, 0),
                "{variant}: {state:?}"
            );
            assert!(
                overlaps.is_empty(),
                "{variant}: two holders at once: {overlaps:?}"
            );
            assert_eq!(state.remaining, 2);
        }
        if variant == "watchdog" || variant == "fenced" {
            assert!(
                state.renewals > 0,
                "{variant}: the watchdog never renewed: {state:?}"
            );
        }
    }
}

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

#[tokio::test]
async fn chaos_is_refused_without_chaos_mode_and_without_the_token() {
    let stack = Stack::start_with(1, None, &["--no-chaos"]).await;
    let url = format!("{}/api/admin/chaos", stack.url);
    let arm = serde_json::json!({"action": "crash_after_setnx"});
    let without = stack.http().post(&url).json(&arm).send().await.unwrap();
    assert_eq!(without.status(), 401);
    let refused = stack
        .http()
        .post(&url)
        .bearer_auth(&stack.token)
        .json(&arm)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"], "forbidden");
    stack.stop().await;
}

/// Without chaos mode, `up`'s Redis refuses DEBUG (a client could pause it
/// with DEBUG SLEEP) and CONFIG (a client could turn persistence, memory
/// limits or anything else off); with it, chaos's "pause Redis" has DEBUG.
#[tokio::test]
async fn without_chaos_up_s_redis_refuses_debug_and_config() {
    for (mode, refused) in [("--no-chaos", true), ("--chaos", false)] {
        let stack = Stack::start_with(1, None, &[mode]).await;
        let mut conn = crate::helpers::redis_conn(stack.redis_url.as_deref().unwrap()).await;
        let debug: redis::RedisResult<String> = redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg(0)
            .query_async(&mut conn)
            .await;
        let config: redis::RedisResult<Vec<String>> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxmemory")
            .query_async(&mut conn)
            .await;
        assert_eq!(debug.is_err(), refused, "{mode}: DEBUG answered {debug:?}");
        assert_eq!(
            config.is_err(),
            refused,
            "{mode}: CONFIG answered {config:?}"
        );
        // Everything else is served as before.
        let pong: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
        assert_eq!(pong, "PONG");
        stack.stop().await;
    }
}

/// A real crash between SETNX and EXPIRE: the lock stays forever, the SKU
/// is stuck (even after `up` restarts the instance) until an admin clears it.
#[tokio::test]
async fn a_crash_between_setnx_and_expire_leaves_the_sku_stuck_until_cleared() {
    let mut stack = Stack::start_with(2, None, &["--chaos"]).await;
    stack.reset("setnx", 10).await;
    stack
        .chaos(serde_json::json!({"action": "crash_after_setnx"}))
        .await;
    let url = "/deductStock/setnx?sku=setnx";
    let (status, body) = stack.client.get(url).await;
    assert_eq!(status, 502, "the instance died mid-request: {body}");
    let restarted = stack
        .next_instance(Duration::from_secs(10))
        .await
        .expect("up restarts the crashed instance");
    eprintln!("instance {} crashed and was restarted", restarted.name);

    let state = stack.state("setnx").await;
    assert!(
        state.lock.held && state.lock.no_ttl,
        "an orphaned lock: {:?}",
        state.lock
    );
    for _ in 0..6 {
        let (status, body) = stack.client.get(url).await;
        assert_eq!(status, 429, "{body}");
        assert_eq!(body["reason"], "lock_held");
    }
    let state = stack.state("setnx").await;
    assert_eq!((state.sold, state.remaining), (0, 10), "stuck: {state:?}");

    // An admin clears the lock: selling resumes.
    stack
        .chaos(serde_json::json!({"action": "lock_vanishes", "sku": "setnx"}))
        .await;
    let (status, body) = stack.client.get(url).await;
    assert_eq!(status, 200, "{body}");
    stack.stop().await;
}

/// A stop-the-world pause (SIGSTOP of the whole process, watchdog
/// included) longer than the lease, between the holder's last check of the
/// lock and its write.
/// Another instance takes the lock meanwhile and sells. The paused holder
/// wakes up and writes: `watchdog` oversells; `fenced` refuses the stale
/// token at the store.
#[tokio::test]
async fn a_pause_longer_than_the_lease_oversells_watchdog_but_not_fenced() {
    let stack = Stack::start_with(2, None, &["--chaos"]).await;
    let redis_url = stack.redis_url.clone().unwrap();
    let (a, b) = (
        stack.client.at(&stack.instances[0].url),
        stack.client.at(&stack.instances[1].url),
    );
    for (variant, oversells) in [("watchdog", true), ("fenced", false)] {
        stack.reset(variant, 5).await;
        let mut events = helpers::keyspace_events(&redis_url, &format!("lock:{{{variant}}}")).await;
        stack
            .chaos(serde_json::json!({"action": "pause_holder", "ms": 1500}))
            .await;

        let knobs = "lease_ms=300&work_ms=0&wait_ms=5000";
        let holder = {
            let (a, path) = (
                a.clone(),
                format!("/deductStock/{variant}?sku={variant}&{knobs}"),
            );
            tokio::spawn(async move { a.get(&path).await })
        };
        // The holder's HINCRBY: instance a holds the lock (and then freezes).
        let first = tokio::time::timeout(Duration::from_secs(5), events.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(first.get_payload::<String>().unwrap(), "hincrby");

        // Instance b waits, takes the lock when the frozen holder's lease runs out, and sells.
        let (status, second) = b
            .get(&format!("/deductStock/{variant}?sku={variant}&{knobs}"))
            .await;
        assert_eq!(status, 200, "{variant}: {second}");
        let (status, paused) = holder.await.unwrap();
        let state = stack.state(variant).await;
        eprintln!("{variant}: paused holder answered {status} {paused}; state {state:?}");
        if oversells {
            assert_eq!(status, 200, "{paused}");
            assert_eq!(paused["unit"], second["unit"], "both sold the same unit");
            assert_eq!((state.oversold, state.duplicates), (1, 1), "{state:?}");
        } else {
            assert_eq!(status, 429, "{paused}");
            assert_eq!(paused["reason"], "stale_token");
            assert_eq!((state.oversold, state.duplicates), (0, 0), "{state:?}");
            assert!(state.fenced_rejections > 0, "{state:?}");
        }
    }
    stack.stop().await;
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

/// Chaos on the Redis that `up` owns: a pause turns sales into 503s for its
/// length, a restart brings Redis back empty on its port (up restarts it).
#[tokio::test]
async fn redis_can_be_paused_and_restarted_when_up_owns_it() {
    let mut stack = Stack::start_with(2, None, &["--chaos"]).await;
    stack.reset("lua", 1000).await;
    let url = "/deductStock/lua?sku=lua";

    stack
        .chaos(serde_json::json!({"action": "pause_redis", "ms": 2000}))
        .await;
    let paused_at = std::time::Instant::now();
    let mut saw_503 = false;
    while paused_at.elapsed() < Duration::from_millis(1500) && !saw_503 {
        saw_503 = stack.client.get(url).await.0 == 503;
    }
    assert!(saw_503, "no 503 while Redis slept");
    let mut back = false;
    while paused_at.elapsed() < Duration::from_secs(6) && !back {
        back = stack.client.get(url).await.0 == 200;
    }
    assert!(back, "sales did not resume after the pause");

    let old = stack.redis_pid.unwrap();
    stack
        .chaos(serde_json::json!({"action": "restart_redis"}))
        .await;
    stack
        .next_line("redis: pid ", Duration::from_secs(10))
        .await
        .expect("up restarts its Redis");
    assert_ne!(stack.redis_pid, Some(old), "a new redis-server");
    // Empty now (persistence is off): reset, then it sells.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut sold = false;
    while std::time::Instant::now() < deadline && !sold {
        let reset = stack.client.reset("lua", 3, 0).await;
        sold = reset.is_ok() && stack.client.get(url).await.0 == 200;
    }
    assert!(sold, "no sale after the restart");
    stack.stop().await;
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

/// A Redis shut down again while it loads its append-only file (a second
/// restart struck before the first came back, as the soak's faults may
/// strike them) is started again by `up`: the stack lives on and sells. A
/// 30-minute soak lost its whole stack so (`up` stopped: "redis-server
/// exited before it was ready").
#[tokio::test]
async fn a_redis_shut_down_while_it_loads_is_started_again() {
    helpers::within(Duration::from_secs(120), async {
        let mut stack = Stack::start_with(2, None, &["--chaos", "--persist"]).await;
        let url = stack.redis_url.clone().expect("up's Redis");
        let client = redis::Client::open(url.as_str()).unwrap();
        // (No response timeout: filling Redis takes a while.)
        let patient = redis::AsyncConnectionConfig::new().set_response_timeout(None);
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&patient)
            .await
            .unwrap();
        // Enough data that loading it takes a while, in the AOF's base.
        let _: () = redis::cmd("DEBUG")
            .arg("POPULATE")
            .arg(1_500_000)
            .query_async(&mut conn)
            .await
            .unwrap();
        let _: () = redis::cmd("BGREWRITEAOF")
            .query_async(&mut conn)
            .await
            .unwrap();
        loop {
            let info: String = redis::cmd("INFO")
                .arg("persistence")
                .query_async(&mut conn)
                .await
                .unwrap();
            if info.contains("aof_rewrite_in_progress:0")
                && info.contains("aof_rewrite_scheduled:0")
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stack
            .chaos(serde_json::json!({"action": "restart_redis"}))
            .await;
        // Redis answers LOADING while it reads its file: shut it down then.
        loop {
            let Ok(mut fresh) = client.get_multiplexed_async_connection().await else {
                continue;
            };
            let pong: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut fresh).await;
            match pong {
                Err(err)
                    if err.kind()
                        == redis::ErrorKind::Server(redis::ServerErrorKind::BusyLoading) =>
                {
                    let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN")
                        .arg("NOSAVE")
                        .query_async(&mut fresh)
                        .await;
                    break;
                }
                Ok(_) => panic!("Redis was ready before it could be shut down while loading"),
                Err(_) => {}
            }
        }
        stack
            .next_line("redis: pid ", Duration::from_secs(60))
            .await
            .expect("up starts its Redis again, and lives on");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut sold = false;
        while std::time::Instant::now() < deadline && !sold {
            let reset = stack.client.reset("lua", 3, 0).await;
            sold = reset.is_ok() && stack.client.get("/deductStock/lua?sku=lua").await.0 == 200;
        }
        assert!(sold, "no sale after Redis came back");
        stack.stop().await;
    })
    .await;
}
