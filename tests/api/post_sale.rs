//! Once a sale is written it is answered `sold`, whatever fails after it:
//! the steps after the order variants' sale script (the chaos check, the
//! order's enqueue, the SKU's registration) are made to fail on a real
//! Redis, every time, by a key of the wrong type (WRONGTYPE), and each
//! failure is counted in the SKU's ledger (`post_sale_failures`).

use stocklock::chaos::Chaos;
use stocklock::knobs::Sku;
use stocklock::store::{Keys, Store};

use crate::helpers::{self, InProcess, in_process_config};

/// Once the sale script sold, nothing after it takes the sale back: the
/// registry write after it fails every time (a key of the wrong type makes
/// its SADD answer WRONGTYPE), and the buyer is still told `sold`, the
/// ledger holds exactly that one sale with its order on the stream, and the
/// failure is counted.
#[tokio::test]
async fn a_failure_after_the_sale_script_is_answered_sold_and_counted() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let instance = InProcess::start(&store, "t", Chaos::off()).await;
    let mut conn = store.conn().await.unwrap();
    let registry = stocklock::orders::message::REGISTRY;
    let _: () = redis::cmd("SET")
        .arg(registry)
        .arg("not a set")
        .query_async(&mut conn)
        .await
        .unwrap();
    for variant in ["lua-stream", "lua-then-queue"] {
        instance.reset(variant, 5, 0).await;
        sold_once_and_counted(&instance, variant).await;
        let keys = Keys::new(&Sku::parse(variant).unwrap());
        let orders: i64 = redis::cmd("XLEN")
            .arg(&keys.orders)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(
            orders, 1,
            "{variant}: its order was enqueued before the failure"
        );
    }
}

/// The chaos check after the sale script fails: an arming was heard, so
/// the sale looks for the armed crash, and its key is a list (WRONGTYPE).
/// The buyer is told `sold`, the sale is the ledger's only one, and the
/// failed check is counted.
#[tokio::test]
async fn a_chaos_check_that_fails_after_the_sale_script_is_answered_sold_and_counted() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    // A whole instance's listener, which hears the arming.
    let wakeups = stocklock::lock::Wakeups::new().also_hearing(stocklock::sale::CHANNELS);
    let _listener = wakeups.listen(store.client().clone());
    wakeups.subscribed().await;
    let config = stocklock::http::InstanceConfig {
        chaos: Chaos::on(0),
        ..in_process_config("t")
    };
    let state = stocklock::http::AppState::new(store.clone(), config, wakeups);
    let background = state.start_background();
    let instance = InProcess(stocklock::http::app(state));
    let mut conn = store.conn().await.unwrap();
    let armed_key = stocklock::chaos::ARMED_KEYS
        .into_iter()
        .find(|key| key.ends_with("crash_before_enqueue"))
        .unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg(armed_key)
        .arg("not a flag")
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: i64 = redis::cmd("PUBLISH")
        .arg(stocklock::chaos::ARMED_CHANNEL)
        .arg(armed_key)
        .query_async(&mut conn)
        .await
        .unwrap();
    for variant in ["lua-stream", "lua-then-queue"] {
        // A state read waits for the listener to count in, which it does
        // after every message heard before (the arming included).
        instance.reset(variant, 5, 0).await;
        instance.state(variant).await;
        sold_once_and_counted(&instance, variant).await;
    }
    for task in background {
        task.abort();
    }
}

/// One buyer of `variant` (its SKU stocked with 5) is answered `sold`, and
/// the ledger holds that one sale and one failure after it.
async fn sold_once_and_counted(instance: &InProcess, variant: &str) {
    let (status, body) = instance
        .get(&format!("/deductStock/{variant}?sku={variant}"))
        .await;
    assert_eq!(
        (status.as_u16(), body["outcome"].as_str()),
        (200, Some("sold")),
        "{variant}: {body}"
    );
    let state = instance.state(variant).await;
    assert_eq!(
        (state.sold, state.remaining, state.post_sale_failures),
        (1, 4, 1),
        "{variant}: one sale, the failure after it counted: {state:?}"
    );
}
