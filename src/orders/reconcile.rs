//! `stocklock reconcile`: the Redis ledger against the orders in
//! PostgreSQL, per SKU, for the SKU's current epoch; and the orders of
//! epochs the ledger no longer knows.
//!
//! The ledger knows how many times each unit is sold now (sales minus the
//! returns of its expired reservations), the units given back (one field
//! per sale) and the stock; the stream holds the messages on their way.
//! A unit sold must have one live order (pending payment or paid) or a
//! message still on its way; anything else is listed:
//!
//! - **lost**: units sold with no order and no message (under-sold, 少卖);
//! - **phantom**: live orders (or messages) no sale backs;
//! - **ordered twice**: units with two live orders;
//! - **unreturned**: expired reservations whose unit never went back;
//! - **returned unexpired**: units given back whose order is not expired;
//! - **stock drift**: the stock is not `initial - sold + returned` (units
//!   that appeared, e.g. a compensating INCR run twice, or vanished).
//!
//! Messages still on their way are not an error, but neither are they
//! matched: [`Reconciliation::clean`] wants none. The workers delete the
//! messages they ack, after the commit of their rows: a message gone from
//! the stream is counted from its row.
//!
//! A reset opens a new epoch and the ledger keeps every epoch it opened
//! (`epochs:{sku}`), so the orders of a past epoch are known to be closed
//! books. Orders of an epoch the ledger never opened are **orphaned**: Redis
//! lost its data (restarted empty, or from an older snapshot) and with it
//! the sales those orders came from. Nothing can check them any more, and
//! the sales answered before the loss whose message was still on the
//! stream are gone without a trace: the verdict is `LEDGER_LOST`, whatever
//! the current epoch says.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use redis::AsyncCommands;
use redis::streams::{StreamInfoGroupsReply, StreamPendingCountReply, StreamRangeReply};

use super::Client;
use super::message::OrderMessage;
use crate::store::{Conn, Keys};
pub use crate::wire::Reconciliation;

/// How many times each unit is sold now: the ledger's bitfield, two bits
/// per unit, unit `initial - i` at field `i`.
pub fn sold_units(initial: i64, bits: &[u8]) -> BTreeMap<i64, i64> {
    let mut sold = BTreeMap::new();
    for i in 0..bits.len() * 4 {
        let times = i64::from((bits[i / 4] >> (6 - 2 * (i % 4))) & 3);
        if times > 0 {
            sold.insert(initial - i as i64, times);
        }
    }
    sold
}

/// (initial, sold, returned, epoch), stock, the units' bitfield, the
/// returns (sale → unit), the stream.
type RedisSide = (
    (Option<i64>, Option<i64>, Option<i64>, Option<i64>),
    Option<i64>,
    Vec<u8>,
    HashMap<i64, i64>,
    StreamRangeReply,
);

/// How many times [`reconcile`] reads both sides again when the ledger
/// moved while it read them.
const READS: usize = 20;

/// Reconciles one SKU.
///
/// Redis's side is read in one atomic step, the orders after it. Whatever
/// happens between the two reads would show as a false alarm: an expiry
/// pass giving a unit back and marking its order expired (an order expired
/// whose return the first read did not see, and its unit sold with no live
/// order), a sale whose order is written meanwhile (an order with no sale).
/// Both move the ledger's counters, which are read again after the orders:
/// if they moved, both sides are read again, up to 20 times (a sale
/// still selling may never hold still: then the last reading is returned,
/// as it is).
pub async fn reconcile(conn: &mut Conn, db: &Client, sku: &str) -> anyhow::Result<Reconciliation> {
    let keys = Keys::tagged_with(sku);
    let mut last = None;
    for _ in 0..READS {
        let reading = read_once(conn, db, sku, &keys).await?;
        let (initial, sold, returned, epoch): (Option<i64>, Option<i64>, Option<i64>, Option<i64>) =
            redis::cmd("HMGET")
                .arg(&keys.ledger)
                .arg(&["initial", "sold", "returned", "epoch"])
                .query_async(conn)
                .await?;
        let after = (
            initial.unwrap_or(0),
            sold.unwrap_or(0),
            returned.unwrap_or(0),
            epoch.unwrap_or(0),
        );
        if after
            == (
                reading.initial,
                reading.sold,
                reading.returned,
                reading.epoch,
            )
        {
            return Ok(reading);
        }
        last = Some(reading);
    }
    Ok(last.unwrap_or_default())
}

/// Both sides read once: [`reconcile`]'s work.
async fn read_once(
    conn: &mut Conn,
    db: &Client,
    sku: &str,
    keys: &Keys,
) -> anyhow::Result<Reconciliation> {
    // One read of Redis's side: MULTI keeps it consistent.
    let ((initial, sold, returned, epoch), stock, bits, returns, stream): RedisSide = redis::pipe()
        .atomic()
        .cmd("HMGET")
        .arg(&keys.ledger)
        .arg(&["initial", "sold", "returned", "epoch"])
        .get(&keys.stock)
        .get(&keys.units)
        .hgetall(&keys.returns)
        .xrange_all(&keys.orders)
        .query_async(conn)
        .await?;
    // Which of those messages a worker is done with (acked), read in the
    // same atomic step; the rows are read after it, so a message acked
    // there has its row committed (a worker acks after its commit).
    let done = acked(conn, keys, &stream).await?;
    let mut r = Reconciliation {
        sku: sku.to_owned(),
        epoch: epoch.unwrap_or(0),
        initial: initial.unwrap_or(0),
        sold: sold.unwrap_or(0),
        returned: returned.unwrap_or(0),
        stock: stock.unwrap_or(0),
        ..Reconciliation::default()
    };
    r.stock_drift = r.stock - (r.initial - r.sold + r.returned);
    let rows = db
        .query(
            "SELECT unit, sale, status FROM orders WHERE sku = $1 AND epoch = $2",
            &[&sku, &r.epoch],
        )
        .await?;
    let mut live: BTreeMap<i64, i64> = BTreeMap::new();
    let mut ordered_sales = BTreeSet::new();
    let mut expired_sales = BTreeMap::new();
    for row in &rows {
        let (unit, sale, status): (i64, i64, String) =
            (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
        ordered_sales.insert(sale);
        match status.as_str() {
            "expired" => {
                r.expired += 1;
                expired_sales.insert(sale, unit);
            }
            "paid" => r.paid += 1,
            _ => r.pending_payment += 1,
        }
        if status != "expired" {
            *live.entry(unit).or_default() += 1;
        }
    }
    let mut on_the_way: BTreeMap<i64, i64> = BTreeMap::new();
    for entry in &stream.ids {
        if let Some(m) = OrderMessage::parse(sku, &entry.map)
            && m.epoch == r.epoch
            && !ordered_sales.contains(&m.sale)
            && !done.contains(&entry.id)
        {
            r.in_flight += 1;
            *on_the_way.entry(m.unit).or_default() += 1;
        }
    }
    let sold_now = sold_units(r.initial, &bits);
    let units: BTreeSet<i64> = sold_now
        .keys()
        .chain(live.keys())
        .chain(on_the_way.keys())
        .copied()
        .collect();
    for unit in units {
        let sold = sold_now.get(&unit).copied().unwrap_or(0);
        let ordered = live.get(&unit).copied().unwrap_or(0);
        let coming = on_the_way.get(&unit).copied().unwrap_or(0);
        if sold > ordered + coming {
            r.lost.push(unit);
        }
        if ordered + coming > sold {
            r.phantom.push(unit);
        }
        if ordered > 1 {
            r.ordered_twice.push(unit);
        }
    }
    for (sale, unit) in &expired_sales {
        if !returns.contains_key(sale) {
            r.unreturned.push(*unit);
        }
    }
    for (sale, unit) in &returns {
        if !expired_sales.contains_key(sale) {
            r.returned_unexpired.push(*unit);
        }
    }
    r.returned_unexpired.sort_unstable();
    orphans(conn, db, keys, &mut r).await?;
    let refused: Option<i64> = conn.hget(&keys.ledger, "order_conflicts").await?;
    r.order_conflicts = refused.unwrap_or(0);
    Ok(r)
}

/// Counts the orders of `r.sku` whose epoch is neither the current one nor
/// one the ledger opened before ([`Keys::epochs`]): orphaned, the ledger
/// lost their history.
async fn orphans(
    conn: &mut Conn,
    db: &Client,
    keys: &Keys,
    r: &mut Reconciliation,
) -> anyhow::Result<()> {
    let rows = db
        .query(
            "SELECT epoch, count(*) FROM orders WHERE sku = $1 AND epoch <> $2
             GROUP BY epoch ORDER BY epoch",
            &[&r.sku, &r.epoch],
        )
        .await?;
    if rows.is_empty() {
        return Ok(());
    }
    let epochs: Vec<(i64, i64)> = rows
        .iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
        .collect::<Result<_, tokio_postgres::Error>>()?;
    // One score per epoch asked, nil for one never opened.
    let known: Vec<Option<f64>> = redis::cmd("ZMSCORE")
        .arg(&keys.epochs)
        .arg(epochs.iter().map(|(epoch, _)| *epoch).collect::<Vec<_>>())
        .query_async(conn)
        .await?;
    for ((epoch, orders), known) in epochs.into_iter().zip(known) {
        if known.is_none() {
            r.orphaned += orders;
            r.orphaned_epochs.push(epoch);
        }
    }
    r.ledger_lost = r.orphaned > 0;
    Ok(())
}

/// The ids of `stream`'s entries the workers' group has acked: delivered
/// (not after its last delivered id) and not pending; the group's last
/// delivered id and pending list are read in one atomic step after the
/// stream, so an entry acked by then has its row committed.
async fn acked(
    conn: &mut Conn,
    keys: &Keys,
    stream: &StreamRangeReply,
) -> anyhow::Result<BTreeSet<String>> {
    if stream.ids.is_empty() {
        return Ok(BTreeSet::new());
    }
    let read: Result<(StreamInfoGroupsReply, StreamPendingCountReply), _> = redis::pipe()
        .atomic()
        .xinfo_groups(&keys.orders)
        .xpending_count(
            &keys.orders,
            super::message::GROUP,
            "-",
            "+",
            stream.ids.len(),
        )
        .query_async(conn)
        .await;
    let (groups, pending) = match read {
        Ok(read) => read,
        // No group yet (no worker has looked): nothing is acked.
        // (In a pipeline the error carries the code in its text.)
        Err(err) if err.to_string().contains("NOGROUP") => return Ok(BTreeSet::new()),
        Err(err) => return Err(err.into()),
    };
    let Some(group) = groups
        .groups
        .iter()
        .find(|g| g.name == super::message::GROUP)
    else {
        return Ok(BTreeSet::new());
    };
    let delivered = stream_id(&group.last_delivered_id);
    let pending: BTreeSet<&str> = pending.ids.iter().map(|p| p.id.as_str()).collect();
    Ok(stream
        .ids
        .iter()
        .filter(|e| stream_id(&e.id) <= delivered && !pending.contains(e.id.as_str()))
        .map(|e| e.id.clone())
        .collect())
}

/// A stream id (`ms-seq`) as numbers, for ordering.
fn stream_id(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}

/// The SKUs whose sales became orders: the workers' registry, and every
/// SKU with an order (a Redis that lost its data lost the registry too).
pub async fn order_skus(conn: &mut Conn, db: &Client) -> anyhow::Result<Vec<String>> {
    let mut skus: BTreeSet<String> = conn.smembers(super::message::REGISTRY).await?;
    for row in db.query("SELECT DISTINCT sku FROM orders", &[]).await? {
        skus.insert(row.try_get(0)?);
    }
    Ok(skus.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bitfield_reads_as_units_sold() {
        // Fields 0..4 of initial 10: units 10, 9, 8, 7 sold 1, 0, 2, 3 times.
        let bits = [0b01_00_10_11u8, 0b01_000000];
        let sold = sold_units(10, &bits);
        assert_eq!(sold, BTreeMap::from([(10, 1), (8, 2), (7, 3), (6, 1)]));
    }
}
