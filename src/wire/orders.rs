//! The orders' shapes: the order view of a SKU (`GET /api/orders`: its
//! summary and the reconciliation of the ledger with the orders), one
//! buyer's order, and the orders of a `load` run.

use serde::{Deserialize, Serialize};

use super::Reconciliation;

/// The header that carries an order's token to pay and find the order.
pub const ORDER_TOKEN: &str = "x-order-token";

/// `GET /api/orders?sku=S`: the SKU's orders at a glance and the books compared.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OrdersView {
    pub summary: OrderSummary,
    pub reconciliation: Reconciliation,
    /// The reconciliation's verdict, in words.
    pub verdict: String,
    /// How old the reading is, milliseconds: the public view answers from
    /// one at most 2 s old; 0 for one read now (the admin token's).
    #[serde(default)]
    pub age_ms: u64,
}

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

/// One order, as its buyer sees it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OrderView {
    pub id: i64,
    pub sku: String,
    pub unit: i64,
    pub status: String,
    /// Milliseconds left to pay (0 once past the deadline); none once paid or expired.
    pub pay_within_ms: Option<i64>,
}

/// The orders of one run, as `load` reports them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OrdersCheck {
    /// `reconcile`'s verdict in words.
    pub verdict: String,
    /// Every sale has its order, nothing is on its way, nothing is wrong.
    pub clean: bool,
    /// Orders of the SKU's epoch (the run reset it with `--stock`).
    pub orders: i64,
    /// From sale to order row, milliseconds.
    pub lag_p50_ms: Option<f64>,
    pub lag_p99_ms: Option<f64>,
    /// Orders written per second, from the first sale to the last row.
    pub orders_per_s: Option<f64>,
}
