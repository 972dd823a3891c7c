//! Which orders belong to a scheduled buyer, for the gates of the order
//! pipeline that meet an order rather than a request: the expiry pass
//! that gives a reservation's unit back. The worker that commits a
//! scheduled buyer's order notes it here (chaos mode only, one hash of
//! the run's lifetime); the expiry pass, in chaos mode, looks each unit it
//! is about to give back up.

use redis::aio::ConnectionLike;

use crate::knobs::Schedule;
use crate::store::StoreError;

/// Every scheduled order: `SKU:EPOCH:SALE` → `RUN:BUYER`.
const SCHEDULED: &str = "{stocklock:gate}:orders";

fn field(sku: &str, epoch: i64, sale: i64) -> String {
    format!("{sku}:{epoch}:{sale}")
}

/// Notes that the order of sale `sale` (epoch `epoch`) of `sku` is
/// `schedule`'s buyer's.
pub async fn note<C: ConnectionLike + Send>(
    conn: &mut C,
    sku: &str,
    epoch: i64,
    sale: i64,
    schedule: &Schedule,
) -> Result<(), StoreError> {
    let _: () = redis::pipe()
        .hset(SCHEDULED, field(sku, epoch, sale), schedule.to_string())
        .ignore()
        .pexpire(SCHEDULED, super::RUN_TTL.as_millis() as i64)
        .ignore()
        .query_async(conn)
        .await?;
    Ok(())
}

/// The schedule whose buyer made that sale, if one did.
pub async fn of<C: ConnectionLike + Send>(
    conn: &mut C,
    sku: &str,
    epoch: i64,
    sale: i64,
) -> Result<Option<Schedule>, StoreError> {
    let noted: Option<String> = redis::cmd("HGET")
        .arg(SCHEDULED)
        .arg(field(sku, epoch, sale))
        .query_async(conn)
        .await?;
    Ok(noted.and_then(|raw| Schedule::parse(&raw).ok()))
}
