//! Units given back by expired reservations are sold first by every sale
//! path (`lua`'s script and the lock variants' write), in-process on a real
//! Redis: never a unit that is already sold while a returned one waits.

use stocklock::chaos::Chaos;
use stocklock::orders::expiry::{GiveBack, give_back};
use stocklock::store::{Keys, Store};

use crate::helpers::{self, InProcess};

/// A sale of `variant` on `sku`, which must sell; its unit.
async fn sold_unit(instance: &InProcess, variant: &str, sku: &str) -> i64 {
    let (status, body) = instance
        .get(&format!("/deductStock/{variant}?sku={sku}"))
        .await;
    assert_eq!(status, 200, "{variant}: {body}");
    body["unit"].as_i64().unwrap()
}

/// Three units sold (3, 2, 1, sales 1 to 3); the unit of sale 1 given back
/// by the real give-back path, then sold by `lua`; the unit of sale 2
/// given back, then sold by each lock variant in turn: the returned unit
/// each time, no duplicate, the ledger exact.
#[tokio::test]
async fn every_sale_path_sells_a_returned_unit_first() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let instance = InProcess::start(&store, "t", Chaos::off()).await;
    for variant in ["token", "watchdog", "fenced"] {
        let sku = format!("returns-{variant}");
        let keys = Keys::tagged_with(&sku);
        instance.reset(&sku, 3, 0).await;
        let units: Vec<i64> = [
            sold_unit(&instance, "lua", &sku).await,
            sold_unit(&instance, "lua", &sku).await,
            sold_unit(&instance, "lua", &sku).await,
        ]
        .into();
        assert_eq!(units, [3, 2, 1]);
        let epoch =
            crate::helpers::epoch(&mut helpers::redis_conn(&redis.url()).await, &keys).await;
        let mut conn = store.conn().await.unwrap();
        let back = give_back(&mut conn, &keys, epoch, 1, 3).await.unwrap();
        assert_eq!(back, GiveBack::Returned);
        assert_eq!(sold_unit(&instance, "lua", &sku).await, 3, "lua");
        let back = give_back(&mut conn, &keys, epoch, 2, 2).await.unwrap();
        assert_eq!(back, GiveBack::Returned);
        assert_eq!(sold_unit(&instance, variant, &sku).await, 2, "{variant}");
        let state = instance.state(&sku).await;
        assert_eq!(
            (
                state.sold,
                state.returned,
                state.remaining,
                state.duplicates,
                state.oversold
            ),
            (5, 2, 0, 0, 0),
            "{variant}: {state:?}"
        );
        // Sold out now: nothing waits to be given back, no unit is left.
        let (status, body) = instance
            .get(&format!("/deductStock/{variant}?sku={sku}"))
            .await;
        assert_eq!(status, 409, "{variant}: {body}");
    }
}
