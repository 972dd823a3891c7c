//! What an instance remembers of the SKUs asked for lately: their keys,
//! made once, and whether each was seen stocked.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};

use super::Seller;
use crate::knobs::Sku;
use crate::ledger;
use crate::store::{Conn, Keys, StoreError};

/// What an instance remembers of a SKU.
pub(super) struct KnownSku {
    pub(super) keys: Keys,
    /// Seen stocked, so that Redis is asked once per SKU: a SKU nobody
    /// stocked is refused before any lock, claim or counter is written, so
    /// that no request for it leaves anything behind. A SKU stays stocked
    /// unless its Redis loses it, which the section's read still notices.
    stocked: AtomicBool,
}

impl KnownSku {
    /// Whether the SKU was ever stocked: remembered once seen, asked of
    /// Redis until then.
    pub(super) async fn stocked(&self, conn: &mut Conn) -> Result<bool, StoreError> {
        if self.stocked.load(Ordering::Relaxed) {
            return Ok(true);
        }
        let stocked = ledger::is_stocked(conn, &self.keys).await?;
        if stocked {
            self.stocked.store(true, Ordering::Relaxed);
        }
        Ok(stocked)
    }
}

/// How many SKUs an instance remembers (about 500 bytes each): the hot ones
/// of a flash sale are few.
pub(super) const SKUS_REMEMBERED: usize = 1024;

impl Seller {
    /// What this instance remembers of `sku` (its keys made now if not).
    pub(super) fn known(&self, sku: &Sku) -> Arc<KnownSku> {
        let mut skus = self.skus.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = skus.get(sku) {
            return known.clone();
        }
        if skus.len() >= SKUS_REMEMBERED {
            skus.clear();
        }
        let known = Arc::new(KnownSku {
            keys: Keys::new(sku),
            stocked: AtomicBool::new(false),
        });
        skus.insert(sku.clone(), known.clone());
        known
    }
}
