//! Request ids: an id is answered once, whoever asks and when, in every
//! protocol.

use stocklock::lock::Hook;
use stocklock::outcome::Outcome;
use stocklock::pgstock;

use super::{BOUND, Protocol, books, buyer, client, migrated, sell};
use crate::helpers::within;
use crate::orders::postgres;

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
