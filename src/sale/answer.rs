//! What a sale ends as: the [`Sale`] a request to `/deductStock` was
//! answered with, or the [`SaleError`] that kept it from being tried.

use crate::knobs::Sku;
use crate::section::Outcome;
use crate::store::StoreError;
use crate::variants::Variant;

/// Why a `pg-*` variant cannot sell on an instance without PostgreSQL.
pub const NO_POSTGRES: &str = "the pg-* variants and redis-then-pg keep their stock in PostgreSQL: this instance was started without --postgres-url (stocklock up starts one unless --orders off; install postgresql, or run scripts/up.sh without --minimal)";

/// What one request to `/deductStock` ended as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sale {
    pub variant: Variant,
    pub sku: Sku,
    pub request_id: Option<String>,
    pub outcome: Outcome,
    /// A retry answered from its request id's record: nothing sold now.
    pub replayed: bool,
    /// Answered from this instance's sold-out mark, without Redis.
    pub from_mark: bool,
    /// A sale that became an order: the token that pays and finds it.
    pub order_token: Option<String>,
}

/// Why a sale could not even be tried.
#[derive(Debug, thiserror::Error)]
pub enum SaleError {
    /// This instance was not given what the variant needs.
    #[error("{0}")]
    NotConfigured(&'static str),
    /// Redis failed before any write was sent: nothing was sold.
    #[error(transparent)]
    Unavailable(#[from] StoreError),
    /// A bug of ours: the sale's task panicked.
    #[error("the sale task failed: {0}")]
    Panicked(String),
}

impl From<crate::lock::Error> for SaleError {
    fn from(err: crate::lock::Error) -> Self {
        SaleError::Unavailable(err.into())
    }
}
