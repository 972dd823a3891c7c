//! An expiry pass that fails half-way (issue 26, point 4): a reservation's
//! unit must never be back in the stock while its order still stands. The
//! failure is armed in PostgreSQL itself: a trigger refuses to mark an
//! order expired while a row of `expiry_fault` exists, as a PostgreSQL
//! restart between the give-back and the commit would. And a pass cut
//! after its commit, before the give-back, is finished by the next one.

use std::time::Duration;

use stocklock::orders::expiry;

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

/// The other side of the order: a pass that committed its cancellations
/// and died before giving the units back (the failure can now only come
/// there) leaves expired orders whose units are still sold, never sold
/// again; the next pass gives them back, once.
#[tokio::test]
async fn a_pass_cut_after_its_commit_is_finished_by_the_next_one() {
    within(Duration::from_secs(60), async {
        let Some(server) = super::postgres().await else {
            return;
        };
        let mut db = super::migrated(&server).await;
        let redis = crate::helpers::redis().await;
        let store = stocklock::store::Store::open(&redis.url()).unwrap();
        let a = crate::helpers::InProcess::start(&store, "a", stocklock::chaos::Chaos::off()).await;
        a.reset("g1", 1, 0).await;
        assert_eq!(a.get("/deductStock/lua?sku=g1").await.0, 200);
        let mut conn = store.conn().await.unwrap();
        let keys = stocklock::store::Keys::tagged_with("g1");
        let epoch = crate::helpers::epoch(&mut conn, &keys).await;
        db.execute(
            "INSERT INTO orders (sku, epoch, unit, sale, status, pay_by)
             VALUES ('g1', $1, 1, 1, 'pending_payment', now() - interval '1 second')",
            &[&epoch],
        )
        .await
        .unwrap();
        // The pass's first step, committed; the process dies here.
        assert_eq!(expiry::cancel_overdue(&db).await.unwrap(), 1);
        let stock = |conn: &mut stocklock::store::Conn| {
            let mut conn = conn.clone();
            let key = keys.stock.clone();
            async move {
                redis::cmd("GET")
                    .arg(key)
                    .query_async::<i64>(&mut conn)
                    .await
                    .unwrap()
            }
        };
        assert_eq!(stock(&mut conn).await, 0, "not back before the give-back");
        // The next pass: nothing overdue, the unit given back.
        let done = expiry::expire(&mut db, &mut conn, None).await.unwrap();
        assert_eq!((done.expired, done.returned), (0, 1), "{done:?}");
        assert_eq!(stock(&mut conn).await, 1);
        let given: bool = db
            .query_one("SELECT given_back_at IS NOT NULL FROM orders", &[])
            .await
            .unwrap()
            .get(0);
        assert!(given);
        let again = expiry::expire(&mut db, &mut conn, None).await.unwrap();
        assert_eq!(again, expiry::Expired::default());
        assert_eq!(stock(&mut conn).await, 1);
        drop(db);
        super::stop(server).await;
    })
    .await;
}
