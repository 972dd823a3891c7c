//! The stock PostgreSQL protects (`stocklock::pgstock`), on a real server:
//! every protocol sells each unit once under a race, and at the moment
//! each one can break (a second buyer reading while the first is between
//! its read and its write) the protected ones hold and the unprotected
//! section loses an update, which the books show; request ids answer once;
//! a commit whose answer a relay drops is `unknown`, and the id's retry
//! learns the sale.
//!
//! Without PostgreSQL the tests say SKIPPED (and fail under CI=true).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use stocklock::lock::{Held, Hook, Point, Reached};
use stocklock::orders::{self, Client};
use stocklock::outcome::{BusyReason, Outcome};
use stocklock::pgstock::{self, Books, Buyer, PgAnswer, sale};
use stocklock::up::pg_relay::PgRelay;
use stocklock::up::postgres::PostgresServer;
use tokio::sync::Notify;

use crate::helpers::within;
use crate::orders::postgres;

const BOUND: Duration = Duration::from_secs(120);

async fn client(server: &PostgresServer) -> Client {
    orders::connect(&server.url()).await.unwrap()
}

/// A client of a fresh server, its schema migrated.
async fn migrated(server: &PostgresServer) -> Client {
    let mut client = client(server).await;
    orders::migrate(&mut client).await.unwrap();
    client
}

fn buyer<'a>(sku: &'a str, request_id: Option<&'a str>) -> Buyer<'a> {
    Buyer {
        sku,
        request_id,
        instance: "t",
        work: Duration::ZERO,
        wait: Duration::from_secs(10),
    }
}

async fn books(client: &Client, sku: &str) -> Books {
    pgstock::books(client, sku).await.unwrap().expect("stocked")
}

/// The protocols, by name.
#[derive(Clone, Copy, Debug)]
enum Protocol {
    Update,
    ForUpdate,
    Advisory,
    Optimistic,
    Unprotected,
}

async fn sell(p: Protocol, c: &mut Client, b: &Buyer<'_>, hook: &Hook) -> PgAnswer {
    match p {
        Protocol::Update => sale::update(&*c, b, hook).await,
        Protocol::ForUpdate => sale::for_update(c, b, hook).await,
        Protocol::Advisory => sale::advisory(c, b, hook).await,
        Protocol::Optimistic => sale::optimistic(&*c, b, hook, 100).await,
        Protocol::Unprotected => sale::unprotected(c, b, hook).await,
    }
    .unwrap_or_else(|err| panic!("{p:?}: {err}"))
}

#[tokio::test]
async fn every_protocol_sells_each_unit_once_under_a_race() {
    within(BOUND, async {
        let Some(server) = postgres().await else {
            return;
        };
        let admin = migrated(&server).await;
        let protocols = [
            Protocol::Update,
            Protocol::ForUpdate,
            Protocol::Advisory,
            Protocol::Optimistic,
        ];
        for p in protocols {
            let sku = format!("race-{p:?}");
            pgstock::reset(&admin, &sku, 30).await.unwrap();
            // 8 pooled connections, 80 buyers for 30 units, a little work each.
            let pool = pgstock::pool(&server.url(), 8).unwrap();
            let mut buyers = Vec::new();
            for _ in 0..80 {
                let (sku, pool) = (sku.clone(), pool.clone());
                buyers.push(tokio::spawn(async move {
                    let mut c = pool.get().await.unwrap();
                    let mut b = buyer(&sku, None);
                    b.work = Duration::from_millis(1);
                    sell(p, &mut c, &b, &Hook::none()).await.outcome
                }));
            }
            let mut units = Vec::new();
            let mut sold_out = 0;
            for b in buyers {
                match b.await.unwrap() {
                    Outcome::Sold { unit, .. } => units.push(unit),
                    Outcome::SoldOut { remaining } => {
                        assert_eq!(remaining, 0, "{p:?}");
                        sold_out += 1;
                    }
                    other => panic!("{p:?}: {other:?}"),
                }
            }
            units.sort_unstable();
            assert_eq!(
                units,
                (1..=30).collect::<Vec<i64>>(),
                "{p:?}: each unit once"
            );
            assert_eq!(sold_out, 50, "{p:?}");
            let b = books(&admin, &sku).await;
            assert_eq!(
                (b.sold, b.remaining, b.duplicates, b.oversold),
                (30, 0, 0, 0),
                "{p:?}: {b:?}"
            );
        }
    })
    .await;
}

/// A hook that holds a buyer at one point until let go, and says when it
/// got there.
struct HoldAt {
    point: &'static str,
    arrived: Notify,
    go: Notify,
}

impl HoldAt {
    fn new(point: &'static str) -> Arc<HoldAt> {
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
async fn someone_waits(admin: &Client, events: &[&str]) {
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

#[tokio::test]
async fn a_request_id_is_answered_once_whoever_asks_and_when() {
    within(BOUND, async {
        let Some(server) = postgres().await else {
            return;
        };
        let admin = migrated(&server).await;
        for p in [
            Protocol::Update,
            Protocol::ForUpdate,
            Protocol::Advisory,
            Protocol::Optimistic,
        ] {
            let sku = format!("ids-{p:?}");
            pgstock::reset(&admin, &sku, 1).await.unwrap();
            // Two attempts with one id at once: one sale, one replay.
            let mut attempts = Vec::new();
            for _ in 0..2 {
                let (sku, mut c) = (sku.clone(), client(&server).await);
                attempts.push(tokio::spawn(async move {
                    sell(p, &mut c, &buyer(&sku, Some("r1")), &Hook::none()).await
                }));
            }
            let mut answers = Vec::new();
            for a in attempts {
                answers.push(a.await.unwrap());
            }
            let sold = Outcome::Sold {
                unit: 1,
                remaining: 0,
            };
            assert!(
                answers.iter().all(|a| a.outcome == sold),
                "{p:?}: {answers:?}"
            );
            assert_eq!(
                answers.iter().filter(|a| a.replayed).count(),
                1,
                "{p:?}: one attempt sold, the other repeated it: {answers:?}"
            );
            let mut c = client(&server).await;
            // A retry later: the same answer, nothing sold.
            let retry = sell(p, &mut c, &buyer(&sku, Some("r1")), &Hook::none()).await;
            assert_eq!((retry.outcome, retry.replayed), (sold, true), "{p:?}");
            // Sold out, for another id: recorded and repeated too.
            let out = sell(p, &mut c, &buyer(&sku, Some("r2")), &Hook::none()).await;
            assert_eq!(out.outcome, Outcome::SoldOut { remaining: 0 }, "{p:?}");
            let again = sell(p, &mut c, &buyer(&sku, Some("r2")), &Hook::none()).await;
            assert_eq!(
                (again.outcome, again.replayed),
                (Outcome::SoldOut { remaining: 0 }, true)
            );
            let b = books(&admin, &sku).await;
            assert_eq!((b.sold, b.duplicates), (1, 0), "{p:?}");
            // A reset starts a new epoch: the id is new there.
            pgstock::reset(&admin, &sku, 1).await.unwrap();
            let fresh = sell(p, &mut c, &buyer(&sku, Some("r1")), &Hook::none()).await;
            assert_eq!((fresh.outcome, fresh.replayed), (sold, false), "{p:?}");
            // A SKU never stocked: nothing written.
            let none = sell(
                p,
                &mut c,
                &buyer("never-stocked", Some("r1")),
                &Hook::none(),
            )
            .await;
            assert_eq!(none.outcome, Outcome::NotStocked, "{p:?}");
        }
        let row = admin
            .query_one(
                "SELECT count(*) FROM stock_requests WHERE sku = 'never-stocked'",
                &[],
            )
            .await
            .unwrap();
        assert_eq!(row.get::<_, i64>(0), 0);
    })
    .await;
}

#[tokio::test]
async fn a_commit_whose_answer_is_lost_is_unknown_and_a_retry_learns_it() {
    within(BOUND, async {
        let Some(server) = postgres().await else {
            return;
        };
        let admin = migrated(&server).await;
        let relay = PgRelay::start(SocketAddr::from(([127, 0, 0, 1], server.port()))).unwrap();
        let through = relay.url_through(&server.url()).unwrap();
        // The statement that commits: COMMIT in a transaction, the
        // statement itself when it is its own transaction.
        for (p, commits) in [
            (Protocol::Update, "update stock"),
            (Protocol::ForUpdate, "commit"),
            (Protocol::Advisory, "commit"),
            (Protocol::Optimistic, "update stock"),
        ] {
            let sku = format!("lost-{p:?}");
            pgstock::reset(&admin, &sku, 10).await.unwrap();
            let mut c = orders::connect(&through).await.unwrap();
            let cut = relay.cut_after(commits);
            let lost = sell(p, &mut c, &buyer(&sku, Some("u1")), &Hook::none()).await;
            cut.await.expect("the relay cut the connection");
            assert_eq!(lost.outcome, Outcome::Unknown, "{p:?}: {lost:?}");
            let b = books(&admin, &sku).await;
            assert_eq!((b.sold, b.remaining), (1, 9), "{p:?}: it was committed");
            // The id's retry, on a connection of its own, learns the sale.
            let mut again = client(&server).await;
            let retry = sell(p, &mut again, &buyer(&sku, Some("u1")), &Hook::none()).await;
            let sold = Outcome::Sold {
                unit: 10,
                remaining: 9,
            };
            assert_eq!((retry.outcome, retry.replayed), (sold, true), "{p:?}");
            assert_eq!(books(&admin, &sku).await.sold, 1, "{p:?}");
        }
        // Cut before the commit (the write inside the transaction): the
        // server rolls back, nothing is sold, and the buyer is told the
        // database failed, not `unknown`.
        for p in [Protocol::ForUpdate, Protocol::Advisory] {
            let sku = format!("cut-early-{p:?}");
            pgstock::reset(&admin, &sku, 10).await.unwrap();
            let mut c = orders::connect(&through).await.unwrap();
            let cut = relay.cut_after("update stock");
            let refused = match p {
                Protocol::ForUpdate => {
                    sale::for_update(&mut c, &buyer(&sku, None), &Hook::none()).await
                }
                _ => sale::advisory(&mut c, &buyer(&sku, None), &Hook::none()).await,
            };
            cut.await.expect("the relay cut the connection");
            assert!(refused.is_err(), "{p:?}: {refused:?}");
            let b = books(&admin, &sku).await;
            assert_eq!((b.sold, b.remaining), (0, 10), "{p:?}: rolled back");
        }
    })
    .await;
}
