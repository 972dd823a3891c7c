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

use crate::store::Conn;
use redis::AsyncCommands;

use crate::chaos;
use crate::store::StoreError;
use crate::variants::Ctx;

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

impl Outcome {
    /// How an outcome is kept for idempotent retries: `sold:UNIT:REMAINING`,
    /// `sold_out:REMAINING`.
    pub fn encode(&self) -> Option<String> {
        match self {
            Outcome::Sold { unit, remaining } => Some(format!("sold:{unit}:{remaining}")),
            Outcome::SoldOut { remaining } => Some(format!("sold_out:{remaining}")),
            Outcome::Busy(_) => None, // nothing happened: a retry may try again
        }
    }

    pub fn decode(text: &str) -> Option<Outcome> {
        let mut parts = text.split(':');
        match (parts.next()?, parts.next(), parts.next()) {
            ("sold", Some(unit), Some(remaining)) => Some(Outcome::Sold {
                unit: unit.parse().ok()?,
                remaining: remaining.parse().ok()?,
            }),
            ("sold_out", Some(remaining), None) => Some(Outcome::SoldOut {
                remaining: remaining.parse().ok()?,
            }),
            _ => None,
        }
    }
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
    /// The store refused the holder's fencing token: a newer holder has been
    /// seen, so this one's lock is gone whatever it believes.
    StaleToken,
    /// A request with the same `request_id` is being answered right now.
    InProgress,
    /// Fewer than a majority of the Redlock nodes answered: nobody can take
    /// the lock until they come back.
    NoQuorum,
}

impl BusyReason {
    pub fn as_str(self) -> &'static str {
        match self {
            BusyReason::LockHeld => "lock_held",
            BusyReason::WaitTimedOut => "wait_timed_out",
            BusyReason::LockLost => "lock_lost",
            BusyReason::StaleToken => "stale_token",
            BusyReason::InProgress => "in_progress",
            BusyReason::NoQuorum => "no_quorum",
        }
    }
}

/// How the section reads and writes the stock. Plain `GET`/`SET` for every
/// variant but one: a fenced lock routes both through scripts that refuse a
/// stale fencing token (`None` / `false`: refused).
pub trait StockAccess {
    fn read(&self, conn: &mut Conn)
    -> impl Future<Output = Result<Option<i64>, StoreError>> + Send;
    fn write(
        &self,
        conn: &mut Conn,
        value: i64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;
}

/// `GET` and `SET` on the stock key, nothing else.
pub struct PlainStock<'a>(pub &'a str);

impl StockAccess for PlainStock<'_> {
    async fn read(&self, conn: &mut Conn) -> Result<Option<i64>, StoreError> {
        let stock: Option<i64> = conn.get(self.0).await?;
        Ok(Some(stock.unwrap_or(0)))
    }

    async fn write(&self, conn: &mut Conn, value: i64) -> Result<bool, StoreError> {
        let _: () = conn.set(self.0, value).await?;
        Ok(true)
    }
}

/// Runs the sale once, inside whatever the variant put around it.
///
/// - A retried `request_id` gets the outcome it had the first time and
///   sells nothing (the check and the record happen here, under the
///   variant's protection).
/// - In chaos mode a pause armed by the lab freezes the whole process after
///   the last check of the lock, right before the write: the worst moment.
/// - `still_held` is asked right before the write: a lock that knows it lost
///   its lease (the watchdog's failed renewal) backs off instead of writing;
///   locks that cannot know always answer `true`.
pub async fn critical_section(
    ctx: &mut Ctx<'_>,
    stock: &impl StockAccess,
    still_held: impl Fn() -> bool,
) -> Result<Outcome, StoreError> {
    let keys = ctx.keys;
    if let Some(id) = ctx.request_id {
        // Claim the id atomically (HSETNX), whatever protects the section:
        // of a storm of retries only one gets past this line.
        let claimed: bool = ctx.conn.hset_nx(&keys.requests, id, PENDING).await?;
        if !claimed {
            let earlier: Option<String> = ctx.conn.hget(&keys.requests, id).await?;
            return Ok(match earlier.as_deref().and_then(Outcome::decode) {
                Some(outcome) => {
                    ctx.replayed = true;
                    outcome
                }
                // The first attempt is still running (or died mid-way).
                None => Outcome::Busy(BusyReason::InProgress),
            });
        }
    }
    let enter = ctx.chaos.witness_clock();
    let outcome = section(ctx, stock, still_held).await;
    if let (Some(id), Ok(outcome)) = (ctx.request_id, &outcome) {
        match outcome.encode() {
            Some(encoded) => {
                let _: i64 = ctx.conn.hset(&keys.requests, id, encoded).await?;
            }
            // Nothing happened: let a retry try again.
            None => {
                let _: i64 = ctx.conn.hdel(&keys.requests, id).await?;
            }
        }
    }
    let outcome = outcome?;
    // Timed now, written after the lock is released (off the critical path).
    ctx.witnessed = enter
        .map(|enter| chaos::Section::timed(ctx.instance, ctx.holder.as_deref(), enter, &outcome));
    Ok(outcome)
}

/// What a claimed request_id holds until its first attempt has an outcome.
const PENDING: &str = "pending";

async fn section(
    ctx: &mut Ctx<'_>,
    stock: &impl StockAccess,
    still_held: impl Fn() -> bool,
) -> Result<Outcome, StoreError> {
    let Some(current) = stock.read(&mut ctx.conn).await? else {
        return Ok(Outcome::Busy(BusyReason::StaleToken));
    };
    if current <= 0 {
        return Ok(Outcome::SoldOut { remaining: current });
    }
    let pause = ctx.chaos.in_the_gap(&mut ctx.conn, ctx.keys).await?;
    if !ctx.knobs.work.is_zero() {
        tokio::time::sleep(ctx.knobs.work).await;
    }
    if !still_held() {
        return Ok(Outcome::Busy(BusyReason::LockLost));
    }
    if let Some(pause) = pause {
        // After the last check, before the write: whatever the lock learns
        // while the process is frozen comes too late.
        ctx.chaos.stop_the_world(pause);
    }
    if !stock.write(&mut ctx.conn, current - 1).await? {
        return Ok(Outcome::Busy(BusyReason::StaleToken));
    }
    Ok(Outcome::Sold {
        unit: current,
        remaining: current - 1,
    })
}

/// The section with nothing around it; `true` for locks that cannot know.
pub fn always_held() -> bool {
    true
}
