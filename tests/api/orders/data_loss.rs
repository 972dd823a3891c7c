//! Redis comes back empty under a stack with orders on (issue 26, point 1):
//! the sales after it must still become orders, and `stocklock reconcile`
//! must say that the ledger lost what it knew, never `clean`.

use std::time::Duration;

use serde_json::Value;

use super::pipeline::{database, reconcile, stack_with};
use crate::helpers::within;

/// Five sales answered `sold` on `variant`, each through nginx.
async fn five_sales(stack: &crate::helpers::Stack, variant: &str, sku: &str) {
    for i in 0..5 {
        let url = format!("/deductStock/{variant}?sku={sku}");
        let (status, body) = stack.client.get(&url).await;
        assert_eq!(status, 200, "sale {i}: {body}");
    }
}

/// Orders of `sku` in PostgreSQL.
async fn orders_of(db: &stocklock::orders::Client, sku: &str) -> i64 {
    db.query_one("SELECT count(*) FROM orders WHERE sku = $1", &[&sku])
        .await
        .unwrap()
        .get(0)
}

/// Point 1's sequence on `variant`: five orders, Redis restarted empty,
/// a reset, five more sales; every sale answered `sold` has its order and
/// reconcile reports the orders whose ledger is gone.
async fn sales_after_redis_lost_its_data_still_become_orders(variant: &str, sku: &str) {
    within(Duration::from_secs(120), async {
        let Some(mut stack) = stack_with(&["--pay-within", "10m", "--chaos"]).await else {
            return;
        };
        stack.reset(sku, 10).await;
        five_sales(&stack, variant, sku).await;
        let (_, before) = reconcile(&stack, sku).await;
        assert_eq!(before["pending_payment"], 5, "{before}");
        let db = database(&stack).await;
        assert_eq!(orders_of(&db, sku).await, 5);

        let old = stack.redis_pid;
        stack
            .chaos(serde_json::json!({"action": "restart_redis"}))
            .await;
        stack
            .next_line("redis: pid ", Duration::from_secs(10))
            .await
            .expect("up restarts its Redis");
        assert_ne!(stack.redis_pid, old, "a new redis-server");
        // The instances reconnect to the empty Redis on their own.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while stack.client.reset(sku, 10, 0).await.is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "no reset after the restart"
            );
        }
        five_sales(&stack, variant, sku).await;

        let (code, after) = reconcile(&stack, sku).await;
        assert_eq!(
            orders_of(&db, sku).await,
            10,
            "ten sales answered sold, each must have its order (reconcile: {after})"
        );
        assert_ne!(
            code, 0,
            "a ledger that lost its history is not clean: {after}"
        );
        assert_eq!(after["ledger_lost"], true, "{after}");
        assert_eq!(
            after["orphaned"], 5,
            "the five orders of the lost epoch: {after}"
        );
        assert_eq!(after["pending_payment"], 5, "the new epoch's five: {after}");
        for list in ["lost", "phantom", "ordered_twice"] {
            assert_eq!(after[list], Value::Array(Vec::new()), "{list}: {after}");
        }
        stack.stop().await;
    })
    .await;
}

#[tokio::test]
async fn lua_stream_sales_after_redis_lost_its_data_still_become_orders() {
    sales_after_redis_lost_its_data_still_become_orders("lua-stream", "c1").await;
}

#[tokio::test]
async fn lua_then_queue_sales_after_redis_lost_its_data_still_become_orders() {
    sales_after_redis_lost_its_data_still_become_orders("lua-then-queue", "c2").await;
}

/// Epochs grow at every reset, also after Redis lost everything (FLUSHALL
/// stands in for a restart without persistence), stay exact integers below
/// 2^53 (Lua's numbers) and are each kept in `epochs:{sku}`.
#[tokio::test]
async fn epochs_are_never_reused_even_by_an_emptied_redis() {
    let redis = crate::helpers::redis().await;
    let store = stocklock::store::Store::open(&redis.url()).unwrap();
    let mut conn = store.conn().await.unwrap();
    let keys = stocklock::store::Keys::tagged_with("ep");
    let mut epochs = Vec::new();
    for flush in [false, false, true, false] {
        if flush {
            let () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
        }
        stocklock::ledger::reset_sku(&mut conn, &keys, 3, 0, false)
            .await
            .unwrap();
        let epoch: String = redis::cmd("HGET")
            .arg(&keys.ledger)
            .arg("epoch")
            .query_async(&mut conn)
            .await
            .unwrap();
        let number: i64 = epoch.parse().unwrap_or_else(|_| panic!("{epoch:?}"));
        assert!(number < 1 << 53, "{number}");
        assert_eq!(number.to_string(), epoch, "written exactly");
        epochs.push(number);
    }
    assert!(epochs.windows(2).all(|w| w[0] < w[1]), "{epochs:?}");
    let kept: Vec<i64> = redis::cmd("ZRANGE")
        .arg(&keys.epochs)
        .arg(0)
        .arg(-1)
        .query_async(&mut conn)
        .await
        .unwrap();
    // The flush took the first two with it; the two since are kept.
    assert_eq!(kept, epochs[2..].to_vec());
}
