//! A test's seam: a section of a SKU held right after its read of the
//! stock, until the test lets it go, so that a test can change the SKU
//! there (a reset) deterministically instead of by timing luck. Costs a
//! section one atomic load while no test holds any SKU.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use tokio::sync::Notify;

static ANY: AtomicBool = AtomicBool::new(false);
static HELD: LazyLock<Mutex<HashMap<String, Arc<ReadGate>>>> = LazyLock::new(Default::default);

/// Where the next section of one SKU waits after its read.
#[derive(Default)]
pub struct ReadGate {
    reached: Notify,
    go: Notify,
}

impl ReadGate {
    /// Resolves once a section of the SKU has read its stock and waits.
    pub async fn reached(&self) {
        self.reached.notified().await;
    }

    /// Lets the waiting section go on.
    pub fn release(&self) {
        self.go.notify_one();
    }
}

/// Holds the next section of `sku` after its read (once).
pub fn hold_after_read(sku: &str) -> Arc<ReadGate> {
    let gate = Arc::new(ReadGate::default());
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    held.insert(sku.to_owned(), gate.clone());
    ANY.store(true, Ordering::Release);
    gate
}

pub(super) async fn after_read(tag: &str) {
    if !ANY.load(Ordering::Acquire) {
        return;
    }
    let gate = HELD.lock().unwrap_or_else(|e| e.into_inner()).remove(tag);
    if let Some(gate) = gate {
        gate.reached.notify_one();
        gate.go.notified().await;
    }
}
