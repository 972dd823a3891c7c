//! A second buyer between the first one's read and its write: the
//! unprotected section loses an update, the row lock and the advisory lock
//! make it wait, the optimistic write reads again or gives up.

use std::sync::Arc;
use std::time::Duration;

use stocklock::lock::{Held, Hook, Point, Reached};
use stocklock::orders::Client;
use stocklock::outcome::{BusyReason, Outcome};
use stocklock::pgstock::{self, sale};
use tokio::sync::Notify;

use super::{BOUND, Protocol, books, buyer, client, migrated, sell};
use crate::helpers::within;
use crate::orders::postgres;

/// A hook that holds a buyer at one point until let go, and says when it
/// got there.
pub(super) struct HoldAt {
    point: &'static str,
    pub(super) arrived: Notify,
    pub(super) go: Notify,
}

impl HoldAt {
    pub(super) fn new(point: &'static str) -> Arc<HoldAt> {
        Arc::new(HoldAt {
            point,
            arrived: Notify::new(),
            go: Notify::new(),
        })
    }
}

impl Reached for HoldAt {
    fn reached(&self, point: Point) -> Held<'_> {
        Box::pin(async move {
            if point.name == self.point {
                self.arrived.notify_one();
                self.go.notified().await;
            }
        })
    }
}

/// Waits until a backend of the server waits on a lock of `kind`
/// (`pg_stat_activity`'s `wait_event_type = 'Lock'`, event `tuple` or
/// `transactionid` for a row, `advisory` for an advisory lock).
pub(super) async fn someone_waits(admin: &Client, events: &[&str]) {
    let events: Vec<String> = events.iter().map(|e| e.to_string()).collect();
    loop {
        let row = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE wait_event_type = 'Lock' AND wait_event = ANY($1)",
                &[&events],
            )
            .await
            .unwrap();
        if row.get::<_, i64>(0) > 0 {
            return;
        }
        // Nothing to be told by: the server's own view, polled.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_second_buyer_between_the_first_ones_read_and_write() {
    within(BOUND, async {
        let Some(server) = postgres().await else {
            return;
        };
        let admin = migrated(&server).await;

        // Unprotected: both read 10 before either writes; both write 9.
        let sku = "gap-unprotected";
        pgstock::reset(&admin, sku, 10).await.unwrap();
        let first = HoldAt::new("after_read");
        let mut a = client(&server).await;
        let hook = Hook::new(first.clone());
        let held = tokio::spawn(async move {
            sell(Protocol::Unprotected, &mut a, &buyer(sku, None), &hook).await
        });
        first.arrived.notified().await;
        let mut b = client(&server).await;
        let second = sell(
            Protocol::Unprotected,
            &mut b,
            &buyer(sku, None),
            &Hook::none(),
        )
        .await;
        first.go.notify_one();
        let first_answer = held.await.unwrap();
        let sold = |unit, remaining| Outcome::Sold { unit, remaining };
        assert_eq!(second.outcome, sold(10, 9));
        assert_eq!(first_answer.outcome, sold(10, 9), "the same unit again");
        let books_now = books(&admin, sku).await;
        assert_eq!(
            (
                books_now.sold,
                books_now.remaining,
                books_now.duplicates,
                books_now.oversold
            ),
            (2, 9, 1, 1),
            "two sales, one unit, the stock down by one: the books show the lost update"
        );

        // The row lock and the advisory lock: the second buyer waits at
        // the lock until the first commits, then reads what it wrote.
        for (p, events) in [
            (Protocol::ForUpdate, &["tuple", "transactionid"][..]),
            (Protocol::Advisory, &["advisory"][..]),
        ] {
            let sku = format!("gap-{p:?}");
            pgstock::reset(&admin, &sku, 10).await.unwrap();
            let first = HoldAt::new("after_read");
            let mut a = client(&server).await;
            let hook = Hook::new(first.clone());
            let sku_a = sku.clone();
            let held =
                tokio::spawn(async move { sell(p, &mut a, &buyer(&sku_a, None), &hook).await });
            first.arrived.notified().await;
            let sku_b = sku.clone();
            let mut b = client(&server).await;
            let waiting =
                tokio::spawn(
                    async move { sell(p, &mut b, &buyer(&sku_b, None), &Hook::none()).await },
                );
            someone_waits(&admin, events).await;
            first.go.notify_one();
            assert_eq!(held.await.unwrap().outcome, sold(10, 9), "{p:?}");
            assert_eq!(waiting.await.unwrap().outcome, sold(9, 8), "{p:?}");
            let b = books(&admin, &sku).await;
            assert_eq!((b.sold, b.remaining, b.duplicates), (2, 8, 0), "{p:?}");
        }

        // Optimistic: the second buyer sells while the first is between
        // its read and its write; the first's write finds the version
        // moved, reads again and sells the next unit.
        let sku = "gap-optimistic";
        pgstock::reset(&admin, sku, 10).await.unwrap();
        let first = HoldAt::new("before_write");
        let a = client(&server).await;
        let hook = Hook::new(first.clone());
        let held = tokio::spawn(async move {
            sale::optimistic(&a, &buyer(sku, None), &hook, 3)
                .await
                .unwrap()
        });
        first.arrived.notified().await;
        let b = client(&server).await;
        let second = sale::optimistic(&b, &buyer(sku, None), &Hook::none(), 3)
            .await
            .unwrap();
        assert_eq!(second.outcome, sold(10, 9));
        first.go.notify_one();
        // Its second try reaches the point again: let it go.
        first.arrived.notified().await;
        first.go.notify_one();
        let first_answer = held.await.unwrap();
        assert_eq!(first_answer.outcome, sold(9, 8));
        assert_eq!(
            first_answer.conflicts, 1,
            "one write refused by the version"
        );
        // With one try only, the same gap is a give-up, nothing sold.
        let first = HoldAt::new("before_write");
        let a = client(&server).await;
        let hook = Hook::new(first.clone());
        let held = tokio::spawn(async move {
            sale::optimistic(&a, &buyer(sku, None), &hook, 1)
                .await
                .unwrap()
        });
        first.arrived.notified().await;
        let second = sale::optimistic(&b, &buyer(sku, None), &Hook::none(), 1)
            .await
            .unwrap();
        assert_eq!(second.outcome, sold(8, 7));
        first.go.notify_one();
        let gave_up = held.await.unwrap();
        assert_eq!(gave_up.outcome, Outcome::Busy(BusyReason::VersionConflict));
        let b = books(&admin, sku).await;
        assert_eq!((b.sold, b.remaining, b.duplicates), (3, 7, 0));
    })
    .await;
}

/// A reset between an advisory holder's read and its write. The advisory
/// lock is on the SKU's name, which a reset does not take, so the reset
/// lands under the holder (a row lock would make it wait); the write's
/// epoch check (the read's stocking) refuses the stale write (`busy`,
/// `reset`), and the new stocking is untouched. Without the check, the
/// write would set the new stock to the old read minus one.
#[tokio::test]
async fn a_reset_under_an_advisory_holder_refuses_its_write() {
    within(BOUND, async {
        let Some(server) = postgres().await else {
            return;
        };
        let admin = migrated(&server).await;
        let sku = "reset-advisory";
        pgstock::reset(&admin, sku, 5).await.unwrap();
        let first = HoldAt::new("before_write");
        let mut a = client(&server).await;
        let hook = Hook::new(first.clone());
        let held = tokio::spawn(async move {
            sell(Protocol::Advisory, &mut a, &buyer(sku, None), &hook).await
        });
        first.arrived.notified().await;
        pgstock::reset(&admin, sku, 10).await.unwrap();
        first.go.notify_one();
        let stale = held.await.unwrap();
        assert_eq!(stale.outcome, Outcome::Busy(BusyReason::Reset), "{stale:?}");
        let b = books(&admin, sku).await;
        assert_eq!((b.sold, b.remaining, b.oversold), (0, 10, 0), "{b:?}");
    })
    .await;
}
