//! The critical section every variant protects, written once.
//!
//! It is article 001's coupon sale, deliberately non-atomic:
//!
//! ```text
//! stock = GET stock:{sku}
//! if stock > 0:
//!     (business work: sleep work_ms)
//!     SET stock:{sku} stock-1      -> sold unit `stock`
//! else
//!     -> sold out
//! ```
//!
//! Between the GET and the SET anything can happen; that gap is what every
//! variant tries to close. Recording the sale is not part of it: the ledger
//! does that afterwards, independently of the variant.

use std::future::Future;
use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::ConnectionManager;

use crate::store::StoreError;

/// What one attempt to buy ended as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Unit `unit` was sold; `remaining` is what the section wrote back.
    Sold { unit: i64, remaining: i64 },
    /// The stock read was `remaining` (zero, or below zero after an oversell).
    SoldOut { remaining: i64 },
    /// The section did not run, or stopped before its write.
    Busy(BusyReason),
}

/// Why a request came back busy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BusyReason {
    /// The lock was held and the request was told not to wait (`wait_ms=0`).
    LockHeld,
    /// The lock was held for longer than `wait_ms`.
    WaitTimedOut,
    /// The holder learned that its lease was lost before it wrote, and backed off.
    LockLost,
}

impl BusyReason {
    pub fn as_str(self) -> &'static str {
        match self {
            BusyReason::LockHeld => "lock_held",
            BusyReason::WaitTimedOut => "wait_timed_out",
            BusyReason::LockLost => "lock_lost",
        }
    }
}

/// How the section reads and writes the stock. Plain `GET`/`SET` for every
/// variant but one: a fenced lock routes both through scripts that refuse a
/// stale fencing token.
pub trait StockAccess {
    fn read(
        &self,
        conn: &mut ConnectionManager,
    ) -> impl Future<Output = Result<i64, StoreError>> + Send;
    fn write(
        &self,
        conn: &mut ConnectionManager,
        value: i64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// `GET` and `SET` on the stock key, nothing else.
pub struct PlainStock<'a>(pub &'a str);

impl StockAccess for PlainStock<'_> {
    async fn read(&self, conn: &mut ConnectionManager) -> Result<i64, StoreError> {
        let stock: Option<i64> = conn.get(self.0).await?;
        Ok(stock.unwrap_or(0))
    }

    async fn write(&self, conn: &mut ConnectionManager, value: i64) -> Result<(), StoreError> {
        let _: () = conn.set(self.0, value).await?;
        Ok(())
    }
}

/// Runs the sale once. `still_held` is asked right before the write: a lock
/// that knows it lost its lease (the watchdog's failed renewal) backs off
/// instead of writing; locks that cannot know always answer `true`.
pub async fn critical_section(
    conn: &mut ConnectionManager,
    stock: &impl StockAccess,
    work: Duration,
    still_held: impl Fn() -> bool,
) -> Result<Outcome, StoreError> {
    let current = stock.read(conn).await?;
    if current <= 0 {
        return Ok(Outcome::SoldOut { remaining: current });
    }
    if !work.is_zero() {
        tokio::time::sleep(work).await;
    }
    if !still_held() {
        return Ok(Outcome::Busy(BusyReason::LockLost));
    }
    stock.write(conn, current - 1).await?;
    Ok(Outcome::Sold {
        unit: current,
        remaining: current - 1,
    })
}

/// The section with nothing around it; `true` for locks that cannot know.
pub fn always_held() -> bool {
    true
}
