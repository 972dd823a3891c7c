//! The ledger: the truth that every number of the lab is read from.
//!
//! Measurement must never depend on the variant being measured. A sale is
//! recorded by the same script that writes the stock (`sell.lua` for the
//! lock variants, `deduct.lua` for the scripted ones), so a stock change
//! without its record, or a record without its stock change, cannot happen
//! in any variant. The ledger holds the sold counter, how often each unit
//! was sold, the other answers (busy, replays), requests per instance, and
//! each request id's outcome. `oversold` and `duplicates` are derived from
//! these, never from what a variant believes it did; `oversold` can never be
//! negative, and a negative figure means the ledger itself broke.

use std::sync::LazyLock;

use redis::Script;
use redis::aio::ConnectionLike;

use std::time::Duration;

use crate::store::{Keys, StoreError};
mod count_in;
mod request_ids;
mod reset;
mod state;

pub use count_in::{CountIn, Counted, count_in};
pub use request_ids::{
    AnswerKind, CLAIM_GRACE, Claim, Claimed, DEFAULT_REQUEST_IDS_PER_SKU, DEFAULT_REQUEST_TTL,
    SOLD_OUT_KEEP, claim, free_claim, record_answer, take_claim_back,
};
pub use reset::{RESET_CHANNEL, bucket_share, reset_sku, reset_sku_unannounced, timeline_off};
pub use state::{redis_memory, snapshot};

/// The shared Lua functions of the ledger (`record(...)`) and of request
/// ids (`now_ms()`, `claim_deadline(...)`, `owns(...)`); scripts that record
/// start with them.
pub const LEDGER_LUA: &str = include_str!("../scripts/ledger.lua");

/// The shared Lua function `admit(ledger, token)` of fencing tokens.
pub const FENCE_LUA: &str = include_str!("../scripts/fence.lua");

/// Builds a script whose body may call the ledger's functions.
pub fn with_ledger(body: &str) -> Script {
    Script::new(&format!("{LEDGER_LUA}\n{body}"))
}

static RESET: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/reset.lua")));

/// Milliseconds for a script.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Whether the SKU was ever stocked (reset, or seeded): only then does it
/// have an epoch.
pub async fn is_stocked<C: ConnectionLike>(conn: &mut C, keys: &Keys) -> Result<bool, StoreError> {
    Ok(redis::cmd("HEXISTS")
        .arg(&keys.ledger)
        .arg("epoch")
        .query_async(conn)
        .await?)
}

/// A counter of the ledger that is added to outside any sale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// Answers of `unknown` outcome an instance gave (counted after the
    /// fact: when it gave them, Redis was not answering).
    Unknown,
    /// Leases a watchdog could not keep.
    LostLocks,
    /// Renewals a watchdog made while its owner held the lock.
    Renewals,
    /// Steps after a written sale that failed (its order's enqueue or
    /// registration, a chaos check): the sale stood and was answered sold.
    PostSaleFailures,
    /// Buyers an instance refused from its sold-out mark (counted after
    /// the fact, with its other answers given without Redis).
    MarkRefusals,
}

impl Counter {
    fn field(self) -> &'static str {
        match self {
            Counter::Unknown => "unknown",
            Counter::LostLocks => "lost_locks",
            Counter::Renewals => "renewals",
            Counter::PostSaleFailures => "post_sale_failures",
            Counter::MarkRefusals => "mark_refusals",
        }
    }
}

/// Adds `n` to one of a SKU's counters.
pub async fn add<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    counter: Counter,
    n: u64,
) -> Result<(), StoreError> {
    let _: i64 = redis::cmd("HINCRBY")
        .arg(&keys.ledger)
        .arg(counter.field())
        .arg(n)
        .query_async(conn)
        .await?;
    Ok(())
}
