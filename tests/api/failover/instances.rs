//! The instances across a failover, through nginx: they sell from the
//! master, answer 503 (never a sale of unknown outcome, never a crash)
//! while it is dead, and sell again from the promoted replica, the stock
//! going on from where the replica had it, with no instance restarted.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{bounded, kill_master_and_fail_over, note, plain, replica_stack};
use crate::helpers::alive;

const STOCK: i64 = 20;

/// One sale attempt of `variant`'s own SKU through nginx with a request
/// id of its own: the status and the body.
async fn buy(stack: &crate::helpers::Stack, variant: &str, id: &str) -> (u16, Value) {
    stack
        .client
        .get(&format!(
            "/deductStock/{variant}?sku={variant}&request_id={id}"
        ))
        .await
}

/// Waits (bounded) until the replica holds `stock` as `variant`'s stock
/// and no lock of it: the sales so far reached it, and so did the release
/// of the last one's lock, which the master sends after the sale's write
/// (a master killed in between leaves the new master a lock nobody holds
/// until its lease ends, and the buyers after the failover wait it out).
async fn replicated(replica_url: &str, variant: &str, stock: i64) {
    let mut conn = plain(replica_url).await;
    let (key, lock) = (
        format!("stock:{{{variant}}}"),
        format!("lock:{{{variant}}}"),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (seen, locked): (Option<i64>, bool) = redis::pipe()
            .get(&key)
            .exists(&lock)
            .query_async(&mut conn)
            .await
            .unwrap();
        if seen == Some(stock) && !locked {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the replica still has {seen:?} for {key}, not {stock} (its lock held: {locked})"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn instances_sell_again_from_the_new_master_without_a_restart() {
    bounded(async {
        let Some(stack) = replica_stack(2).await else {
            return;
        };
        let pids: Vec<u32> = stack.instances.iter().map(|i| i.pid).collect();
        let replica = stack.replica.clone().unwrap();
        let variants = ["lua", "watchdog"];
        for variant in variants {
            stack.reset(variant, STOCK).await;
        }

        // Before: both instances sell, and the replica receives it all.
        let mut left = std::collections::BTreeMap::new();
        for variant in variants {
            let mut by = BTreeSet::new();
            for n in 0..4 {
                let (status, body) = buy(&stack, variant, &format!("before-{n}")).await;
                assert_eq!(status, 200, "{variant} before the failover: {body}");
                assert_eq!(body["unit"], STOCK - n, "{body}");
                by.insert(body["instance"].as_str().unwrap_or_default().to_owned());
            }
            assert_eq!(by.len(), 2, "{variant}: both instances should have sold");
            left.insert(variant, STOCK - 4);
            replicated(&replica.url, variant, STOCK - 4).await;
        }

        let (_, took) = kill_master_and_fail_over(&stack).await;
        let promoted = Instant::now();
        note(&format!(
            "failover with two instances: kill to promotion {} ms",
            took.as_millis()
        ));

        // After: 503s (nothing sold, nothing unknown) until each instance
        // has found the new master; then sales go on from the replica's
        // stock, on both instances, none restarted.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut attempt = 0;
        let mut refused = 0;
        for variant in variants {
            let mut by = BTreeSet::new();
            let mut sold_after = 0;
            while by.len() < 2 || sold_after < 4 {
                assert!(
                    Instant::now() < deadline,
                    "{variant}: instances {by:?} sold again within 30 s of the promotion"
                );
                attempt += 1;
                let (status, body) = buy(&stack, variant, &format!("after-{attempt}")).await;
                match status {
                    200 => {
                        let unit = *left.get(variant).unwrap();
                        assert_eq!(body["unit"], unit, "{variant}: stock went on from {unit}: {body}");
                        left.insert(variant, unit - 1);
                        sold_after += 1;
                        by.insert(body["instance"].as_str().unwrap_or_default().to_owned());
                    }
                    503 => {
                        assert_eq!(
                            body["error"], "store_unavailable",
                            "{variant}: a 503 while the master was away must say nothing was sent: {body}"
                        );
                        refused += 1;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    other => panic!("{variant}: {other} across the failover: {body}"),
                }
            }
        }
        note(&format!(
            "instances selling again: {} ms after the promotion ({refused} answers 503 store_unavailable meanwhile)",
            promoted.elapsed().as_millis()
        ));

        // The books on the new master, read through the instances (their
        // listeners follow the master too: a state read waits for every
        // instance's flush over pub/sub).
        for variant in variants {
            let state = stack.state(variant).await;
            assert_eq!(state.remaining, left[variant], "{state:?}");
            assert_eq!(state.sold, STOCK - left[variant], "{state:?}");
            assert_eq!((state.oversold, state.duplicates), (0, 0), "{state:?}");
        }
        let now: Vec<u32> = stack.instances.iter().map(|i| i.pid).collect();
        assert_eq!(now, pids, "an instance was restarted");
        assert!(pids.iter().all(|pid| alive(*pid)));
        stack.stop().await;
    })
    .await;
}
