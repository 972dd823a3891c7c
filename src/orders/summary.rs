//! A SKU's orders at a glance: how many are reserved, paid, expired and
//! given back, and how long sales took to become order rows (the
//! dashboard's order panel, `GET /api/orders`).

use serde::{Deserialize, Serialize};

use super::Client;

/// The orders of a SKU's current epoch.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OrderSummary {
    pub sku: String,
    pub epoch: i64,
    /// Reserved: pending payment.
    pub reserved: i64,
    pub paid: i64,
    pub expired: i64,
    /// From sale (Redis's clock) to order row (PostgreSQL's), milliseconds:
    /// the pipeline's lag, median and 99th percentile.
    pub lag_p50_ms: Option<f64>,
    pub lag_p99_ms: Option<f64>,
    /// Orders written per second, from the epoch's first sale to its last
    /// order row: what the pipeline sustained behind the sales.
    pub orders_per_s: Option<f64>,
}

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
