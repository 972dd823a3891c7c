//! The load: each variant's seller, round after round on a fresh SKU of
//! its own, stocked through the round's recording client, its buyers'
//! round handed to the checker.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use tokio::task::JoinHandle;

use super::STALL;
use super::args::SoakArgs;
use super::buyers::{self, Shared};
use super::checker::Checker;
use crate::client::StackClient;
use crate::history::Recorder;
use crate::variants::Variant;

/// One seller per variant, until the load stops; the SKUs a lock variant
/// sells now are in `lock_skus` while its round plays.
pub(super) fn spawn(
    args: &SoakArgs,
    variants: &[Variant],
    shared: &Arc<Shared>,
    checker: &Arc<Checker>,
    lock_skus: &Arc<StdMutex<Vec<String>>>,
) -> Vec<JoinHandle<()>> {
    let mut sellers = Vec::new();
    for (n, variant) in variants.iter().copied().enumerate() {
        let (shared, checker, lock_skus) = (shared.clone(), checker.clone(), lock_skus.clone());
        let (seed, buyers, stock) = (args.seed, args.buyers, args.stock);
        sellers.push(tokio::spawn(async move {
            let mut index = 0u32;
            while !shared.stop.load(Ordering::Relaxed) {
                let sku = format!("soak{seed}-{n}-{index}");
                index += 1;
                // The round's own recording client: its reset declares the
                // SKU, every attempt of its buyers is recorded.
                let recorder = Recorder::prefixed(&format!("{}/", variant.name()));
                let client = shared.client.recording(recorder);
                if !stocked(&shared, &client, &sku, variant, stock).await {
                    break;
                }
                if variant.takes_lock() {
                    lock_skus
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(sku.clone());
                }
                let round =
                    buyers::round(shared.clone(), client, variant, sku.clone(), buyers, STALL)
                        .await;
                lock_skus
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .retain(|s| *s != sku);
                checker
                    .pending
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(round);
            }
        }));
    }
    sellers
}

/// Stocks a round's SKU through `client` (whose history it starts),
/// trying again while the stack is down; `false` when the load stopped
/// first.
async fn stocked(
    shared: &Shared,
    client: &StackClient,
    sku: &str,
    variant: Variant,
    stock: i64,
) -> bool {
    while !shared.stop.load(Ordering::Relaxed) {
        if client.reset(sku, stock, variant.buckets()).await.is_ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    false
}
