//! The worker's insert meets another order's identity (issue 26, point 4):
//! an order row already holds the message's sale for another unit. The
//! message is not acked: it is retried, counted and logged, and becomes
//! its order once the conflict is gone.

use std::time::Duration;

use stocklock::store::Keys;

use super::pipeline::{database, pending, reconcile, redis, stack_with};
use crate::helpers::within;

#[tokio::test]
async fn an_insert_refused_by_another_order_is_retried_and_counted_never_acked() {
    within(Duration::from_secs(120), async {
        let Some(stack) = stack_with(&["--pay-within", "10m", "--claim-idle", "500ms"]).await
        else {
            return;
        };
        let sku = "k1";
        stack.reset(sku, 5).await;
        let mut conn = redis(&stack).await;
        let keys = Keys::tagged_with(sku);
        let epoch = crate::helpers::epoch(&mut conn, &keys).await;
        // Sale 1 of this epoch is taken by an order of another unit.
        let db = database(&stack).await;
        db.execute(
            "INSERT INTO orders (sku, epoch, unit, sale, status) VALUES ($1, $2, 999, 1, 'paid')",
            &[&sku, &epoch],
        )
        .await
        .unwrap();
        let url = format!("/deductStock/lua-stream?sku={sku}");
        assert_eq!(stack.client.get(&url).await.0, 200);
        // The worker tries, is refused, and keeps the message: it is pending
        // once a worker has read it, and the refusals are counted.
        let refused = loop {
            let refused: Option<i64> = redis::cmd("HGET")
                .arg(&keys.ledger)
                .arg("order_conflicts")
                .query_async(&mut conn)
                .await
                .unwrap();
            if refused.unwrap_or(0) >= 2 {
                break refused.unwrap_or(0);
            }
            assert_eq!(
                unacked(&mut conn, &keys).await,
                1,
                "the refused message was acked, its order silently dropped"
            );
            // The worker's pace (a retry per claim): look again.
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(
            pending(&mut conn, &keys).await,
            1,
            "refused {refused} times"
        );
        let (code, r) = reconcile(&stack, sku).await;
        assert_ne!(code, 0, "{r}");
        assert!(r["order_conflicts"].as_i64() >= Some(refused), "{r}");
        // The squatter gone, the retry writes the order and acks it.
        db.execute("DELETE FROM orders WHERE unit = 999", &[])
            .await
            .unwrap();
        while pending(&mut conn, &keys).await > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (code, r) = reconcile(&stack, sku).await;
        assert_eq!(code, 0, "{r}");
        assert_eq!(r["pending_payment"].as_i64(), Some(1), "{r}");
        stack.stop().await;
    })
    .await;
}

/// Messages of the stream the workers have not acked: all of them before
/// the group exists, then those pending or not yet read (its lag).
async fn unacked(conn: &mut stocklock::store::Conn, keys: &Keys) -> i64 {
    let groups: Result<Vec<std::collections::HashMap<String, redis::Value>>, _> =
        redis::cmd("XINFO")
            .arg("GROUPS")
            .arg(&keys.orders)
            .query_async(conn)
            .await;
    let number = |group: &std::collections::HashMap<String, redis::Value>, field: &str| -> i64 {
        group
            .get(field)
            .and_then(|v| redis::from_redis_value_ref::<i64>(v).ok())
            .unwrap_or(0)
    };
    match groups.ok().and_then(|g| g.into_iter().next()) {
        Some(group) => number(&group, "pending") + number(&group, "lag"),
        None => redis::cmd("XLEN")
            .arg(&keys.orders)
            .query_async(conn)
            .await
            .unwrap(),
    }
}
