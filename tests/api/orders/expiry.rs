//! An expiry pass that fails half-way (issue 26, point 4): a reservation's
//! unit must never be back in the stock while its order still stands. The
//! failure is armed in PostgreSQL itself: a trigger refuses to mark an
//! order expired while a row of `expiry_fault` exists, as a PostgreSQL
//! restart between the give-back and the commit would.

use std::time::Duration;

use super::pipeline::{database, reconcile, stack_with};
use crate::helpers::within;

/// The armed fault: every attempt to expire an order fails (and counts
/// itself in a sequence, which a rollback does not undo) until disarmed.
const ARM: &str = "
CREATE TABLE expiry_fault (armed boolean);
CREATE SEQUENCE expiry_fault_hits;
CREATE FUNCTION expiry_fault() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'expired' AND OLD.status <> 'expired'
       AND EXISTS (SELECT 1 FROM expiry_fault) THEN
        PERFORM nextval('expiry_fault_hits');
        RAISE EXCEPTION 'expiry fails here, as armed';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER expiry_fault BEFORE UPDATE ON orders
    FOR EACH ROW EXECUTE FUNCTION expiry_fault();
INSERT INTO expiry_fault VALUES (true);";

#[tokio::test]
async fn a_failed_expiry_never_leaves_a_pending_order_whose_unit_is_back_in_stock() {
    within(Duration::from_secs(120), async {
        let Some(stack) = stack_with(&["--pay-within", "1s"]).await else {
            return;
        };
        let (variant, sku) = ("lua-stream", "e1");
        let db = database(&stack).await;
        db.batch_execute(ARM).await.unwrap();
        stack.reset(sku, 1).await;
        let url = format!("/deductStock/{variant}?sku={sku}&request_id=r1");
        assert_eq!(stack.client.get(&url).await.0, 200);
        // The expiry passes reach the order past its deadline and fail, twice.
        let hits = loop {
            let hits: i64 = db
                .query_one(
                    "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM expiry_fault_hits",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            if hits >= 2 {
                break hits;
            }
            // The passes' pace (every 250 ms here): look again.
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let status: String = db
            .query_one("SELECT status FROM orders WHERE sku = $1", &[&sku])
            .await
            .unwrap()
            .get(0);
        let state = stack.state(sku).await;
        assert_eq!(status, "pending_payment", "the fault keeps it pending");
        assert_eq!(
            (state.remaining, state.returned),
            (0, 0),
            "after {hits} failed passes the unit is back in stock while its order is still pending: \
             a buyer can be sold it again ({state:?})"
        );
        assert_eq!(stack.client.get(&url.replace("r1", "r2")).await.0, 409);

        // Disarmed, the next pass expires it and gives the unit back, once.
        db.batch_execute("DELETE FROM expiry_fault").await.unwrap();
        while stack.state(sku).await.remaining == 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(stack.client.get(&url.replace("r1", "r3")).await.0, 200);
        let (code, r) = reconcile(&stack, sku).await;
        assert_eq!(code, 0, "{r}");
        assert_eq!((r["sold"].as_i64(), r["expired"].as_i64()), (Some(2), Some(1)), "{r}");
        stack.stop().await;
    })
    .await;
}
