//! A database lock's holder the database stops hearing from: cut off by a
//! partition right before its write, its session is ended by PostgreSQL
//! once idle for its lease (`idle_in_transaction_session_timeout`), a
//! second buyer sells while the holder is still cut off, and the holder's
//! late write is refused (`lock_lost`), nothing sold by it. A holder that
//! works longer than its lease but is heard (its `SELECT 1` every third of
//! the lease) keeps its lock and sells.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use stocklock::lock::{Held, Hook, Point, Reached};
use stocklock::orders;
use stocklock::outcome::{BusyReason, Outcome};
use stocklock::pgstock::{self, Buyer};
use stocklock::up::pg_relay::PgRelay;
use tokio::sync::Notify;

use super::{BOUND, Protocol, books, buyer, client, migrated, sell};
use crate::helpers::within;
use crate::orders::postgres;

/// The holder's lease, and how long its relay is cut off (far longer).
const LEASE: Duration = Duration::from_millis(300);
const PARTITION: Duration = Duration::from_secs(3);

/// A hook that cuts the relay off when its buyer is about to write, and
/// says so.
struct CutAt {
    relay: Arc<PgRelay>,
    cut: Notify,
}

impl Reached for CutAt {
    fn reached(&self, point: Point) -> Held<'_> {
        Box::pin(async move {
            if point.name == "before_write" {
                self.relay.partition(PARTITION);
                self.cut.notify_one();
            }
        })
    }
}

#[tokio::test]
async fn a_holder_cut_off_from_the_database_loses_its_lock_within_its_lease() {
    within(BOUND, async {
        let Some(server) = postgres().await else {
            return;
        };
        let admin = migrated(&server).await;
        let relay = PgRelay::start(SocketAddr::from(([127, 0, 0, 1], server.port()))).unwrap();
        let relay = Arc::new(relay);
        let through = relay.url_through(&server.url()).unwrap();
        for p in [Protocol::ForUpdate, Protocol::Advisory] {
            let sku = format!("silent-{p:?}");
            pgstock::reset(&admin, &sku, 10).await.unwrap();
            let cut = Arc::new(CutAt {
                relay: relay.clone(),
                cut: Notify::new(),
            });
            let hook = Hook::new(cut.clone());
            let mut c = orders::connect(&through).await.unwrap();
            let holder_sku = sku.clone();
            let holder = tokio::spawn(async move {
                let b = Buyer {
                    lease: LEASE,
                    ..buyer(&holder_sku, None)
                };
                sell(p, &mut c, &b, &hook).await
            });
            cut.cut.notified().await;
            // The second buyer waits for the lock, which the database
            // frees once the holder's session has been idle for its lease.
            let mut other = client(&server).await;
            let sold = sell(p, &mut other, &buyer(&sku, None), &Hook::none()).await;
            assert_eq!(
                sold.outcome,
                Outcome::Sold {
                    unit: 10,
                    remaining: 9
                },
                "{p:?}"
            );
            assert!(
                !holder.is_finished(),
                "{p:?}: the holder answered before its partition ended"
            );
            let late = holder.await.unwrap();
            assert_eq!(
                late.outcome,
                Outcome::Busy(BusyReason::LockLost),
                "{p:?}: {late:?}"
            );
            let b = books(&admin, &sku).await;
            assert_eq!((b.sold, b.remaining, b.oversold), (1, 9, 0), "{p:?}");
        }
    })
    .await;
}

#[tokio::test]
async fn a_holder_heard_while_it_works_keeps_its_lock_past_its_lease() {
    within(BOUND, async {
        let Some(server) = postgres().await else {
            return;
        };
        let admin = migrated(&server).await;
        for p in [Protocol::ForUpdate, Protocol::Advisory] {
            let sku = format!("heard-{p:?}");
            pgstock::reset(&admin, &sku, 10).await.unwrap();
            let mut c = client(&server).await;
            let slow = Buyer {
                lease: LEASE,
                work: 4 * LEASE,
                ..buyer(&sku, None)
            };
            let sold = sell(p, &mut c, &slow, &Hook::none()).await;
            assert_eq!(
                sold.outcome,
                Outcome::Sold {
                    unit: 10,
                    remaining: 9
                },
                "{p:?}"
            );
        }
    })
    .await;
}
