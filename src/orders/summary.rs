//! A SKU's orders at a glance: how many are reserved, paid, expired and
//! given back, and how long sales took to become order rows (the
//! dashboard's order panel, `GET /api/orders`); and the books of an
//! instance's recent readings, which the public view answers from.
//!
//! A reconciliation reads the whole order stream up to 20 times and every
//! order of the epoch: a crowd asking for it at once must not make each ask
//! one. [`RecentBooks`] keeps each SKU's last reading for [`FRESH_FOR`] and
//! computes at most one at a time: callers that arrive meanwhile wait for
//! it and share it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::Client;
use super::reconcile::{Reconciliation, reconcile};
use crate::store::Store;
use crate::wire::OrderSummary;

/// How old a reading the public orders view may answer with.
pub const FRESH_FOR: Duration = Duration::from_secs(2);

/// The summary of `sku`'s orders in `epoch`.
pub async fn summary(db: &Client, sku: &str, epoch: i64) -> anyhow::Result<OrderSummary> {
    let row = db
        .query_one(
            "SELECT count(*) FILTER (WHERE status = 'pending_payment'),
                    count(*) FILTER (WHERE status = 'paid'),
                    count(*) FILTER (WHERE status = 'expired'),
                    percentile_cont(0.5) WITHIN GROUP (ORDER BY lag),
                    percentile_cont(0.99) WITHIN GROUP (ORDER BY lag),
                    count(*)::float8 / nullif(extract(epoch FROM max(created_at) - min(sold_at))::float8, 0)
             FROM (SELECT status, created_at, sold_at,
                          extract(epoch FROM created_at - sold_at)::float8 * 1000 AS lag
                   FROM orders WHERE sku = $1 AND epoch = $2) AS o",
            &[&sku, &epoch],
        )
        .await?;
    Ok(OrderSummary {
        sku: sku.to_owned(),
        epoch,
        reserved: row.try_get(0)?,
        paid: row.try_get(1)?,
        expired: row.try_get(2)?,
        lag_p50_ms: row.try_get(3)?,
        lag_p99_ms: row.try_get(4)?,
        orders_per_s: row.try_get(5)?,
    })
}

/// A SKU's books: its orders at a glance and their reconciliation with the
/// ledger.
#[derive(Clone, Debug)]
pub struct Books {
    pub summary: OrderSummary,
    pub reconciliation: Reconciliation,
}

/// Reads `sku`'s books now: the full reconciliation, then the summary of
/// its epoch.
pub async fn books(store: &Store, db: &Client, sku: &str) -> anyhow::Result<Books> {
    let mut conn = store.conn().await?;
    let reconciliation = reconcile(&mut conn, db, sku).await?;
    let summary = summary(db, sku, reconciliation.epoch).await?;
    // A reconciliation reads every order and message of the epoch at
    // once: give back what it took.
    crate::os::release_freed_memory();
    Ok(Books {
        summary,
        reconciliation,
    })
}

/// An instance's recent readings of books, one per SKU.
#[derive(Default)]
pub struct RecentBooks {
    /// Held while a reading is made: one at a time, whatever the SKU.
    readings: tokio::sync::Mutex<HashMap<String, (Instant, Books)>>,
}

impl RecentBooks {
    /// `sku`'s books at most `fresh_for` old, and their age: the last
    /// reading, or a new one made now (a failed one is not kept).
    pub async fn get(
        &self,
        store: &Store,
        db: &Client,
        sku: &str,
        fresh_for: Duration,
    ) -> anyhow::Result<(Books, Duration)> {
        let mut readings = self.readings.lock().await;
        if let Some((at, books)) = readings.get(sku)
            && at.elapsed() <= fresh_for
        {
            return Ok((books.clone(), at.elapsed()));
        }
        let read = books(store, db, sku).await?;
        // Stale readings go: the map holds only the SKUs asked for lately.
        readings.retain(|_, (at, _)| at.elapsed() <= fresh_for);
        readings.insert(sku.to_owned(), (Instant::now(), read.clone()));
        Ok((read, Duration::ZERO))
    }
}
