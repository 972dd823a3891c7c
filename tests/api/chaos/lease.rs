//! The articles' three breaks of a lease: work longer than the lease, a
//! crash between SETNX and EXPIRE, a stop-the-world pause of the holder
//! longer than the lease.

use std::time::Duration;

use futures_util::StreamExt;
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
