//! Resets: a SKU's stock, ledger and lock start over, in one key or split
//! over buckets, announced to every instance.

use redis::aio::ConnectionLike;

use super::RESET;
use crate::store::{Keys, StoreError};

/// The channel a reset of a SKU is announced on (the message: the SKU), so
/// that every instance drops what it remembers of the SKU's old stock.
pub const RESET_CHANNEL: &str = "stocklock:reset";

/// Sets the stock to `stock`, records the SKU's bucket count, and clears
/// the ledger and the lock, atomically. With `only_if_absent` it leaves a
/// SKU that already has stock alone and returns `false`.
async fn reset<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    stock: i64,
    buckets: u32,
    only_if_absent: bool,
) -> Result<bool, StoreError> {
    let done: i64 = RESET
        .key(&keys.stock)
        .key(&keys.ledger)
        .key(&keys.units)
        .key(&keys.served)
        .key(&keys.lock)
        .key(&keys.requests)
        .key(&keys.sections)
        .key(&keys.request_times)
        .key(&keys.orders)
        .key(&keys.returns)
        .key(&keys.returned_units)
        .key(&keys.epochs)
        .arg(stock)
        .arg(if only_if_absent { "1" } else { "0" })
        .arg(buckets)
        .invoke_async(conn)
        .await?;
    Ok(done == 1)
}

/// How `stock` is split over `buckets`: bucket `b` gets this much (the
/// first `stock % buckets` buckets one more).
pub fn bucket_share(stock: i64, buckets: u32, b: u32) -> i64 {
    let k = i64::from(buckets.max(1));
    stock / k + i64::from(i64::from(b) < stock % k)
}

/// Resets a SKU with its stock in one key (`buckets` 0) or split over
/// `buckets` buckets of their own slots (`lua-sharded`); the SKU's own key
/// then holds none and its ledger records the split. Buckets of an earlier
/// split are emptied. Not atomic across buckets (they live in other slots):
/// an admin action, not a sale. Announced on [`RESET_CHANNEL`], so that
/// every instance drops what it remembers of the old stock.
pub async fn reset_sku<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    stock: i64,
    buckets: u32,
    only_if_absent: bool,
) -> Result<bool, StoreError> {
    if !reset_sku_unannounced(conn, keys, stock, buckets, only_if_absent).await? {
        return Ok(false);
    }
    let _: i64 = redis::cmd("PUBLISH")
        .arg(RESET_CHANNEL)
        .arg(&keys.tag)
        .query_async(conn)
        .await?;
    Ok(true)
}

/// Tells the `lua` family's scripts to record no sections of this SKU (on
/// each of its buckets) until its next reset.
pub async fn timeline_off<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    buckets: u32,
) -> Result<(), StoreError> {
    // One by one: the buckets live in other slots.
    for ledger in
        std::iter::once(keys.ledger.clone()).chain((0..buckets).map(|b| keys.bucket(b).ledger))
    {
        redis::cmd("HSET")
            .arg(ledger)
            .arg("timeline")
            .arg(0)
            .query_async::<i64>(conn)
            .await?;
    }
    Ok(())
}

/// [`reset_sku`] without its announcement: what an instance sees of a
/// reset whose announcement it missed (the tests of sold-out marks).
pub async fn reset_sku_unannounced<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    stock: i64,
    buckets: u32,
    only_if_absent: bool,
) -> Result<bool, StoreError> {
    let before: Option<u32> = redis::cmd("HGET")
        .arg(&keys.ledger)
        .arg("buckets")
        .query_async(conn)
        .await?;
    let own = if buckets > 0 { 0 } else { stock };
    if !reset(conn, keys, own, buckets, only_if_absent).await? {
        return Ok(false);
    }
    // Every bucket, used or emptied, carries the count: a sale that walks
    // with another one is told so before it touches anything.
    for b in 0..buckets.max(before.unwrap_or(0)) {
        let share = if b < buckets {
            bucket_share(stock, buckets, b)
        } else {
            0
        };
        reset(conn, &keys.bucket(b), share, buckets, false).await?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_share_the_stock_exactly() {
        for stock in [0, 1, 7, 50, 1000, 1001] {
            for buckets in [1, 2, 3, 8, 64] {
                let shares: Vec<i64> = (0..buckets)
                    .map(|b| bucket_share(stock, buckets, b))
                    .collect();
                assert_eq!(shares.iter().sum::<i64>(), stock, "{stock} over {buckets}");
                let (min, max) = (shares.iter().min().unwrap(), shares.iter().max().unwrap());
                assert!(max - min <= 1, "{shares:?}");
            }
        }
    }
}
