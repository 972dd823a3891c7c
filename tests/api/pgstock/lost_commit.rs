//! A commit whose answer a relay drops: the buyer is told `unknown`, and
//! the id's retry learns the sale; a cut before the commit sells nothing.

use std::net::SocketAddr;

use stocklock::lock::Hook;
use stocklock::orders;
use stocklock::outcome::Outcome;
use stocklock::pgstock::{self, sale};
use stocklock::up::pg_relay::PgRelay;

use super::{BOUND, Protocol, books, buyer, client, migrated, sell};
use crate::helpers::within;
use crate::orders::postgres;

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
