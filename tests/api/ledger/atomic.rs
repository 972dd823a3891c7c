//! Atomic reads and scripts that change all or nothing, in-process on a
//! real Redis: a reset landing right after a section's read (held there by
//! the section's seam) sells nothing from the old stock, a script that
//! fails its check changes nothing, and a Redis that forgot the sale
//! script (NOSCRIPT) is given it and sells once.

use std::collections::BTreeMap;
use std::time::Duration;

use stocklock::chaos::Chaos;
use stocklock::section::seam;
use stocklock::store::{Keys, Store};

use crate::helpers::{self, InProcess};

/// A section reads the SKU's stock (1 unit); the SKU is reset to 10 before
/// the section goes on. The stock it read and the epoch it writes under
/// must come from the same moment: its write is refused (`busy`, `reset`)
/// and the new ledger is untouched.
#[tokio::test]
async fn a_reset_between_the_read_and_the_write_sells_nothing_from_the_old_stock() {
    let redis = helpers::redis().await;
    let instance = InProcess::start(&Store::open(&redis.url()).unwrap(), "t", Chaos::off()).await;
    for variant in ["token", "watchdog", "fenced"] {
        let sku = format!("read-{variant}");
        instance.reset(&sku, 1, 0).await;
        let gate = seam::hold_after_read(&sku);
        let mut buyer = {
            let instance = instance.clone();
            let path = format!("/deductStock/{variant}?sku={sku}");
            tokio::spawn(async move { instance.get(&path).await })
        };
        tokio::select! {
            () = gate.reached() => {}
            answer = &mut buyer => panic!("{variant}: answered without reading: {answer:?}"),
            () = tokio::time::sleep(Duration::from_secs(10)) => panic!("{variant}: never read"),
        }
        instance.reset(&sku, 10, 0).await;
        gate.release();
        let (status, body) = buyer.await.unwrap();
        let state = instance.state(&sku).await;
        assert_eq!(
            (status.as_u16(), body["reason"].as_str()),
            (429, Some("reset")),
            "{variant}: {body}; {state:?}"
        );
        assert_eq!(
            (state.initial, state.sold, state.remaining),
            (10, 0, 10),
            "{variant}: {state:?}"
        );
    }
}

/// Every key of `sku` a sale or a give-back may write, as Redis holds it:
/// strings (the units' bitfield too) as bytes, hashes sorted, lists in order.
async fn dumped(redis_url: &str, sku: &str) -> Vec<(String, String)> {
    let keys = Keys::tagged_with(sku);
    let mut conn = helpers::redis_conn(redis_url).await;
    let mut dumps = Vec::new();
    for key in [
        &keys.stock,
        &keys.ledger,
        &keys.units,
        &keys.served,
        &keys.requests,
        &keys.returns,
        &keys.returned_units,
    ] {
        let kind: String = redis::cmd("TYPE")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let value = match kind.as_str() {
            "string" => {
                let bytes: Vec<u8> = redis::cmd("GET")
                    .arg(key)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                format!("{bytes:?}")
            }
            "hash" => {
                let mut fields: BTreeMap<String, String> = redis::cmd("HGETALL")
                    .arg(key)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                // The newest fencing token seen is written by `fenced`'s read,
                // which succeeds before its write fails: not the failing script's.
                fields.retain(|field, _| !field.starts_with("fence_"));
                format!("{fields:?}")
            }
            "list" => {
                let items: Vec<String> = redis::cmd("LRANGE")
                    .arg(key)
                    .arg(0)
                    .arg(-1)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                format!("{items:?}")
            }
            other => other.to_owned(),
        };
        dumps.push((key.clone(), value));
    }
    dumps
}

/// Scripts check before they write: Redis keeps the writes a script made
/// before an error, so a check that fails after a write leaves half a sale.
/// Here the stock is set above the ledger's initial by hand, so the unit to
/// sell has no place in the units' bitfield: the sale scripts (`lua`'s one
/// script, `lua-batch`'s batch, the lock variants' write) and a give-back of a unit above the
/// initial must fail and change nothing at all, and say nothing was sold.
#[tokio::test]
async fn a_script_that_fails_its_check_changes_nothing() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let instance = InProcess::start(&store, "t", Chaos::off()).await;
    let sku = "over";
    instance.reset(sku, 3, 0).await;
    let mut conn = helpers::redis_conn(&redis.url()).await;
    let _: () = redis::cmd("SET")
        .arg(Keys::tagged_with(sku).stock)
        .arg(5)
        .query_async(&mut conn)
        .await
        .unwrap();
    let before = dumped(&redis.url(), sku).await;
    for variant in ["lua", "lua-batch", "token", "fenced"] {
        for id in ["", "&request_id=over-1"] {
            let (status, body) = instance
                .get(&format!("/deductStock/{variant}?sku={sku}{id}"))
                .await;
            // What the instance counts by itself goes in before a state is read.
            let _ = instance.get(&format!("/api/state?sku={sku}")).await;
            assert_eq!(
                dumped(&redis.url(), sku).await,
                before,
                "{variant}{id} changed the SKU: {body}"
            );
            assert_eq!(
                (status.as_u16(), body["error"].as_str()),
                (503, Some("store_unavailable")),
                "{variant}{id}: {body}"
            );
        }
    }
    let epoch = crate::helpers::epoch(&mut conn, &Keys::tagged_with(sku)).await;
    let given_back = stocklock::orders::expiry::give_back(
        &mut store.conn().await.unwrap(),
        &Keys::tagged_with(sku),
        epoch,
        1,
        5,
    )
    .await;
    assert!(given_back.is_err(), "{given_back:?}");
    assert_eq!(
        dumped(&redis.url(), sku).await,
        before,
        "the give-back changed the SKU"
    );
}

/// The sale script is sent by its hash; a Redis that does not know it
/// (SCRIPT FLUSH, as after a restart) answers NOSCRIPT without running
/// anything, and the instance loads the script and asks again: each buyer
/// sold exactly once, with each script that sells by hash (`lua`, and
/// `lua-batch`'s batch).
#[tokio::test]
async fn a_redis_that_forgot_the_sale_script_is_given_it_and_sells_once() {
    let redis = helpers::redis().await;
    let instance = InProcess::start(&Store::open(&redis.url()).unwrap(), "t", Chaos::off()).await;
    let mut conn = helpers::redis_conn(&redis.url()).await;
    for variant in ["lua", "lua-batch"] {
        let sku = format!("noscript-{variant}");
        instance.reset(&sku, 5, 0).await;
        for sale in 1..=2 {
            let _: () = redis::cmd("SCRIPT")
                .arg("FLUSH")
                .query_async(&mut conn)
                .await
                .unwrap();
            let (status, body) = instance
                .get(&format!("/deductStock/{variant}?sku={sku}"))
                .await;
            assert_eq!(
                (status.as_u16(), body["unit"].as_i64()),
                (200, Some(6 - sale)),
                "{variant}, sale {sale}: {body}"
            );
        }
        let state = instance.state(&sku).await;
        assert_eq!(
            (state.sold, state.remaining, state.duplicates),
            (2, 3, 0),
            "{variant}: {state:?}"
        );
    }
}
