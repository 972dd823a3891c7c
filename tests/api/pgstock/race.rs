//! Every protocol under a race: 80 buyers for 30 units, each unit sold
//! once.

use std::time::Duration;

use stocklock::lock::Hook;
use stocklock::outcome::Outcome;
use stocklock::pgstock;

use super::{BOUND, Protocol, books, buyer, migrated, sell};
use crate::helpers::within;
use crate::orders::postgres;

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
