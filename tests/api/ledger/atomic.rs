//! Atomic reads and scripts that change all or nothing, in-process on a
//! real Redis: a reset landing right after a section's read (held there by
//! the section's seam) sells nothing from the old stock, and a script that
//! fails its check changes nothing.

use std::time::Duration;

use stocklock::chaos::Chaos;
use stocklock::section::seam;
use stocklock::store::Store;

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
