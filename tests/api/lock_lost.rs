//! Lost means lost, promptly: a renewed guard whose key is deleted, or
//! taken over by another owner, hears it from its next renewal, refused,
//! within one renewal interval (a third of its lease) and long before its
//! own deadline could have told it. Each delay is printed: the figure the
//! measurements page lists.

use std::time::{Duration, Instant};

use stocklock::lock::{LeaseLock, LockOptions, ReentrantLock};

use crate::helpers;
use crate::lock::setup;

/// The lease: a renewal every second, and at least two seconds of
/// deadline left whenever the key goes.
const LEASE: Duration = Duration::from_secs(3);
/// Learned within this of the key's going: one renewal interval and some
/// slack, and below the two seconds the deadline has left at least (so
/// the deadline cannot be what told it).
const PROMPT: Duration = Duration::from_millis(1_900);

#[tokio::test]
async fn a_renewed_guard_learns_its_key_deleted_or_taken_within_one_renewal() {
    let (_redis, store, wakeups) = setup().await;
    let conn = store.conn().await.unwrap();
    let key = "lock:{lost}";
    let options = LockOptions::new().lease(LEASE).renew(true);
    let mut delays = Vec::new();
    for kind in ["lease", "reentrant", "reentrant, fenced"] {
        for how in ["deleted", "taken over"] {
            let guard = match kind {
                "lease" => LeaseLock::new(conn.clone(), key, wakeups.clone())
                    .acquire(&options)
                    .await
                    .unwrap(),
                "reentrant" => ReentrantLock::new(conn.clone(), key, wakeups.clone())
                    .acquire(&options)
                    .await
                    .unwrap(),
                _ => ReentrantLock::new(conn.clone(), key, wakeups.clone())
                    .fenced("fence:{lost}")
                    .acquire(&options)
                    .await
                    .unwrap(),
            };
            let mut admin = conn.clone();
            let gone = Instant::now();
            let _: i64 = redis::cmd("DEL")
                .arg(key)
                .query_async(&mut admin)
                .await
                .unwrap();
            if how == "taken over" {
                let _: () = redis::cmd("SET")
                    .arg(key)
                    .arg("someone-else")
                    .arg("PX")
                    .arg(30_000)
                    .query_async(&mut admin)
                    .await
                    .unwrap();
            }
            tokio::time::timeout(LEASE * 2, guard.lost())
                .await
                .unwrap_or_else(|_| panic!("{kind}, {how}: never learned"));
            let delay = gone.elapsed();
            helpers::note(&format!(
                "lost(): {kind}, key {how}: learned after {delay:?}"
            ));
            assert!(delay < PROMPT, "{kind}, {how}: learned after {delay:?}");
            assert!(guard.is_lost());
            delays.push(delay);
            drop(guard);
            let _: i64 = redis::cmd("DEL")
                .arg(key)
                .query_async(&mut admin)
                .await
                .unwrap();
        }
    }
    delays.sort();
    helpers::note(&format!(
        "lost(): median {:?}, max {:?} over {} (renewal every {:?})",
        delays[delays.len() / 2],
        delays[delays.len() - 1],
        delays.len(),
        LEASE / 3
    ));
}
