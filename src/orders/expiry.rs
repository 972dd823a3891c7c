//! Reservations that expire (拍下减库存 with a payment deadline). An order
//! is `pending_payment` until it is paid ([`pay`]); past its `pay_by` it is
//! cancelled and its unit goes back to the stock, exactly once.
//!
//! An expiry pass ([`expire`]) first marks the overdue reservations
//! expired and commits ([`cancel_overdue`]: `FOR UPDATE SKIP LOCKED`, so
//! passes of several instances share the work), then gives each unit back
//! in Redis and records it (`given_back_at`, [`give_back_cancelled`]).
//! In that order, a failure in between (PostgreSQL or Redis gone, the
//! process killed) leaves an expired order whose unit is not back yet,
//! which the next pass gives back (`give_back.lua` is idempotent per sale);
//! never a pending order whose unit is back in stock and sold again, whose
//! new order the live-unit constraint would refuse. A payment is refused
//! once `pay_by` has passed, and row locks order a payment and an expiry
//! of the same order: a unit is never both paid for and back in stock.

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;
use serde::{Deserialize, Serialize};

use super::Client;
use crate::store::{Conn, Keys, StoreError};

static GIVE_BACK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/give_back.lua")));

/// Reservations handled by one pass at most.
const PASS: i64 = 500;

/// What giving a unit back did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GiveBack {
    /// Back in stock now.
    Returned,
    /// Given back before: nothing changed.
    Again,
    /// The SKU was reset since the sale: nothing changed.
    Stale,
}

/// Gives the unit of sale `sale` (epoch `epoch`) back to the stock, once.
pub async fn give_back(
    conn: &mut Conn,
    keys: &Keys,
    epoch: i64,
    sale: i64,
    unit: i64,
) -> Result<GiveBack, StoreError> {
    let answer: String = GIVE_BACK
        .key(&keys.stock)
        .key(&keys.ledger)
        .key(&keys.units)
        .key(&keys.returns)
        .key(&keys.returned_units)
        .arg(epoch)
        .arg(sale)
        .arg(unit)
        .invoke_async(conn)
        .await?;
    Ok(match answer.as_str() {
        "returned" => GiveBack::Returned,
        "again" => GiveBack::Again,
        _ => GiveBack::Stale,
    })
}

/// What one expiry pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expired {
    /// Reservations cancelled by this pass.
    pub expired: u64,
    /// Units of cancelled reservations (this pass's, or an interrupted
    /// earlier one's) given back to the stock now.
    pub returned: u64,
    /// Units given back before, by a pass that did not get to record it.
    pub again: u64,
    /// Reservations of a stock since reset (nothing to give back).
    pub stale: u64,
}

/// One expiry pass: every reservation past its deadline (up to a few
/// hundred) is cancelled, then the units of cancelled reservations not
/// yet given back are given back.
///
/// With `gates` (chaos mode: the store the gates go through), a scheduled
/// buyer's unit is given back only once its run lets it go from
/// `before_give_back`.
pub async fn expire(
    db: &mut Client,
    conn: &mut Conn,
    gates: Option<&crate::gate::Gates>,
) -> anyhow::Result<Expired> {
    let expired = cancel_overdue(db).await?;
    let mut done = give_back_cancelled(db, conn, gates).await?;
    done.expired = expired;
    Ok(done)
}

/// Marks the overdue reservations expired, committed (one statement); how
/// many. Their units are still sold: [`give_back_cancelled`] returns them.
pub async fn cancel_overdue(db: &Client) -> anyhow::Result<u64> {
    Ok(db
        .execute(
            "UPDATE orders SET status = 'expired', expired_at = clock_timestamp()
             WHERE id IN (SELECT id FROM orders
                 WHERE status = 'pending_payment' AND pay_by < clock_timestamp()
                 ORDER BY pay_by LIMIT $1 FOR UPDATE SKIP LOCKED)",
            &[&PASS],
        )
        .await?)
}

/// Gives back the units of expired orders not given back yet (cancelled
/// by this pass, or by one that failed before this step), then records
/// them given back. Two passes at once may give the same one back: the
/// second finds it given (`again`) and changes nothing.
pub async fn give_back_cancelled(
    db: &Client,
    conn: &mut Conn,
    gates: Option<&crate::gate::Gates>,
) -> anyhow::Result<Expired> {
    let cancelled = db
        .query(
            "SELECT id, sku, epoch, sale, unit FROM orders
             WHERE status = 'expired' AND given_back_at IS NULL ORDER BY id LIMIT $1",
            &[&PASS],
        )
        .await?;
    let mut done = Expired::default();
    let mut ids = Vec::with_capacity(cancelled.len());
    for row in &cancelled {
        let (id, sku, epoch, sale, unit): (i64, String, i64, i64, i64) = (
            row.try_get(0)?,
            row.try_get(1)?,
            row.try_get(2)?,
            row.try_get(3)?,
            row.try_get(4)?,
        );
        if let Some(gates) = gates
            && let Some(schedule) = crate::gate::orders::of(conn, &sku, epoch, sale).await?
        {
            let client = gates.client().await?;
            crate::gate::Gate::hook(client, schedule, "expiry", &sku)
                .at(crate::gate::points::BEFORE_GIVE_BACK)
                .await;
        }
        match give_back(conn, &Keys::tagged_with(&sku), epoch, sale, unit).await? {
            GiveBack::Returned => done.returned += 1,
            GiveBack::Again => done.again += 1,
            GiveBack::Stale => done.stale += 1,
        }
        ids.push(id);
    }
    if !ids.is_empty() {
        db.execute(
            "UPDATE orders SET given_back_at = clock_timestamp() WHERE id = ANY($1)",
            &[&ids],
        )
        .await?;
    }
    Ok(done)
}

/// How a payment went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Paid {
    /// Paid now, or paid before (a retry): the order's SKU and unit.
    Paid {
        sku: String,
        unit: i64,
        again: bool,
    },
    /// Past its deadline, or already cancelled: the unit went back.
    Expired,
    NotFound,
}

/// Whether `given` is the order's `token`, compared in constant time (an
/// order written without a token matches nothing).
pub fn token_matches(token: Option<&str>, given: &str) -> bool {
    use subtle::ConstantTimeEq;
    token.is_some_and(|token| bool::from(token.as_bytes().ct_eq(given.as_bytes())))
}

/// Pays order `id` for the holder of its `token`, if its reservation still
/// stands. A wrong token is [`Paid::NotFound`], as a missing order is.
pub async fn pay(db: &Client, id: i64, token: &str) -> anyhow::Result<Paid> {
    // The compare is ours (constant time), not the database's: the row is
    // read first, then updated only for its owner.
    let owned = db
        .query_opt("SELECT token FROM orders WHERE id = $1", &[&id])
        .await?;
    let owned = match owned {
        Some(row) => token_matches(row.try_get::<_, Option<String>>(0)?.as_deref(), token),
        None => false,
    };
    if !owned {
        return Ok(Paid::NotFound);
    }
    let paid = db
        .query_opt(
            "UPDATE orders SET status = 'paid', paid_at = clock_timestamp()
             WHERE id = $1 AND status = 'pending_payment' AND pay_by >= clock_timestamp()
             RETURNING sku, unit",
            &[&id],
        )
        .await?;
    if let Some(row) = paid {
        return Ok(Paid::Paid {
            sku: row.try_get(0)?,
            unit: row.try_get(1)?,
            again: false,
        });
    }
    let row = db
        .query_opt("SELECT status, sku, unit FROM orders WHERE id = $1", &[&id])
        .await?;
    Ok(match row {
        None => Paid::NotFound,
        Some(row) => match row.try_get::<_, String>(0)?.as_str() {
            "paid" => Paid::Paid {
                sku: row.try_get(1)?,
                unit: row.try_get(2)?,
                again: true,
            },
            _ => Paid::Expired,
        },
    })
}

/// Runs expiry passes every `every` until the process ends (each instance
/// runs one; they share the work).
/// With `gates` (chaos mode), scheduled buyers' units wait at their gate.
pub async fn run(
    store: crate::store::Store,
    url: String,
    every: Duration,
    gates: Option<crate::gate::Gates>,
) {
    loop {
        let pass = async {
            let mut db = super::connect(&url).await?;
            let mut conn = store.conn().await?;
            loop {
                // Held with the workers (chaos mode): a schedule passes
                // when it chooses (`POST /api/admin/orders/expire`).
                if let Some(gates) = &gates
                    && crate::gate::workers::held(gates).await?
                {
                    tokio::time::sleep(every).await;
                    continue;
                }
                let done = expire(&mut db, &mut conn, gates.as_ref()).await?;
                if done.expired + done.returned + done.again + done.stale > 0 {
                    tracing::info!(?done, "expired reservations");
                } else {
                    tokio::time::sleep(every).await;
                }
            }
            #[allow(unreachable_code)]
            Ok::<(), anyhow::Error>(())
        };
        if let Err(err) = pass.await {
            tracing::warn!("expiry pass: {err:#}; trying again");
        }
        tokio::time::sleep(every.max(Duration::from_millis(250))).await;
    }
}
