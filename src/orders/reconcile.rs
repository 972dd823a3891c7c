//! `stocklock reconcile`: the Redis ledger against the orders in
//! PostgreSQL, per SKU, for the SKU's current epoch.
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
//! matched: [`Reconciliation::clean`] wants none.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use redis::AsyncCommands;
use redis::streams::{StreamInfoGroupsReply, StreamPendingCountReply, StreamRangeReply};
use serde::{Deserialize, Serialize};

use super::Client;
use super::message::OrderMessage;
use crate::store::{Conn, Keys};

/// The books of one SKU, compared.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reconciliation {
    pub sku: String,
    pub epoch: i64,
    /// The ledger: stock set by the reset, sales, units given back, stock left.
    pub initial: i64,
    pub sold: i64,
    pub returned: i64,
    pub stock: i64,
    /// Orders of this epoch by status.
    pub pending_payment: i64,
    pub paid: i64,
    pub expired: i64,
    /// Messages on their way: on the stream, not yet acked by a worker.
    pub in_flight: i64,
    pub lost: Vec<i64>,
    pub phantom: Vec<i64>,
    pub ordered_twice: Vec<i64>,
    pub unreturned: Vec<i64>,
    pub returned_unexpired: Vec<i64>,
    /// `stock - (initial - sold + returned)`.
    pub stock_drift: i64,
}

impl Reconciliation {
    /// Everything matches, and nothing is on its way.
    pub fn clean(&self) -> bool {
        self.matches() && self.in_flight == 0
    }

    /// Nothing is wrong (messages may still be on their way).
    pub fn matches(&self) -> bool {
        self.lost.is_empty()
            && self.phantom.is_empty()
            && self.ordered_twice.is_empty()
            && self.unreturned.is_empty()
            && self.returned_unexpired.is_empty()
            && self.stock_drift == 0
    }

    /// One line: the verdict.
    pub fn verdict(&self) -> String {
        if self.clean() {
            return format!(
                "clean: {} sold, {} orders ({} paid, {} pending, {} expired), {} returned",
                self.sold,
                self.pending_payment + self.paid + self.expired,
                self.paid,
                self.pending_payment,
                self.expired,
                self.returned
            );
        }
        let mut wrong = Vec::new();
        let mut list = |what: &str, units: &[i64]| {
            if !units.is_empty() {
                wrong.push(format!("{} {what} {}", units.len(), shown(units)));
            }
        };
        list("lost (sold, no order)", &self.lost);
        list("phantom (order, no sale)", &self.phantom);
        list("ordered twice", &self.ordered_twice);
        list("expired, never returned", &self.unreturned);
        list("returned, not expired", &self.returned_unexpired);
        if self.stock_drift != 0 {
            wrong.push(format!(
                "stock drift {:+} (stock {}, expected {})",
                self.stock_drift,
                self.stock,
                self.initial - self.sold + self.returned
            ));
        }
        if self.in_flight > 0 {
            wrong.push(format!("{} messages still on their way", self.in_flight));
        }
        wrong.join("; ")
    }
}

/// A few units, then how many more.
fn shown(units: &[i64]) -> String {
    let head: Vec<String> = units.iter().take(8).map(i64::to_string).collect();
    let more = units.len().saturating_sub(8);
    if more > 0 {
        format!("(units {}, and {more} more)", head.join(", "))
    } else {
        format!("(units {})", head.join(", "))
    }
}

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
    Ok(r)
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

/// The SKUs whose sales became orders (the workers' registry).
pub async fn order_skus(conn: &mut Conn) -> anyhow::Result<Vec<String>> {
    let skus: BTreeSet<String> = conn.smembers(super::message::REGISTRY).await?;
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

    #[test]
    fn a_verdict_names_what_is_wrong() {
        let mut r = Reconciliation {
            sold: 3,
            initial: 3,
            ..Default::default()
        };
        r.pending_payment = 3;
        assert!(r.clean(), "{}", r.verdict());
        r.lost = vec![2];
        r.stock_drift = 1;
        r.stock = 1;
        assert!(!r.matches());
        assert_eq!(
            r.verdict(),
            "1 lost (sold, no order) (units 2); stock drift +1 (stock 1, expected 0)"
        );
    }
}
