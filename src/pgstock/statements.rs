//! The pieces the protocols of [`sale`](super::sale) share: the sale's
//! statement (the stock's update, the sale's row and the id's answer in
//! one), the section's write, the answers built from a row, the lock's
//! refusal and timeout, and the business work.

use std::time::Duration;

use tokio_postgres::GenericClient;
use tokio_postgres::error::SqlState;

use super::ids::record_sold_out;
use super::{Buyer, PgAnswer, PgError};
use crate::outcome::{BusyReason, Outcome};

/// The statement of a sale: the stock row's write (`remaining` set to
/// `new_remaining` where `condition` holds), the sale's row and the
/// request id's answer, all or nothing. Parameters: `$1` the SKU, `$2`
/// the request id (or NULL), `$3` the instance, then the protocol's own.
/// Returns the unit (`unit`, evaluated after the write) and what remains.
pub(super) fn sale_statement(new_remaining: &str, condition: &str, unit: &str) -> String {
    format!(
        "WITH s AS (
             UPDATE stock SET remaining = {new_remaining}, sold = sold + 1, version = version + 1
             WHERE sku = $1 AND {condition}
             RETURNING epoch, sold, remaining, {unit} AS unit
         ), sale AS (
             INSERT INTO stock_sales (sku, epoch, sale, unit, request_id, instance)
             SELECT $1, epoch, sold, unit, $2::text, $3::text FROM s
         ), answer AS (
             INSERT INTO stock_requests (sku, epoch, request_id, outcome, unit, remaining)
             SELECT $1, epoch, $2::text, 'sold', unit, remaining FROM s WHERE $2::text IS NOT NULL
         )
         SELECT unit, remaining FROM s"
    )
}

/// The section's write: what was read (`read`) minus one, and the sale,
/// where `condition` holds of `$5` (`check`: the epoch read, or the
/// version read); no row when it does not.
pub(super) async fn write_back(
    c: &impl GenericClient,
    buyer: &Buyer<'_>,
    condition: &str,
    read: i64,
    check: i64,
) -> Result<Option<tokio_postgres::Row>, tokio_postgres::Error> {
    c.query_opt(
        &sale_statement("$4 - 1", condition, "$4::bigint"),
        &[
            &buyer.sku,
            &buyer.request_id,
            &buyer.instance,
            &read,
            &check,
        ],
    )
    .await
}

pub(super) fn sold_answer(unit: i64, remaining: i64) -> PgAnswer {
    PgAnswer::new(Outcome::Sold { unit, remaining })
}

/// `update`'s sold-out answer: the stock as read now (the row that did not
/// match), recorded for the id.
pub(super) async fn sold_out(
    c: &impl GenericClient,
    buyer: &Buyer<'_>,
) -> Result<PgAnswer, PgError> {
    let Some(row) = c
        .query_opt("SELECT remaining FROM stock WHERE sku = $1", &[&buyer.sku])
        .await?
    else {
        return Ok(PgAnswer::new(Outcome::NotStocked));
    };
    record_sold_out(c, buyer, row.try_get(0)?).await
}

/// A lock that was not had: `busy`, nothing written.
pub(super) fn lock_refused(
    err: tokio_postgres::Error,
    buyer: &Buyer<'_>,
) -> Result<PgAnswer, PgError> {
    match err.code() {
        Some(code) if code == &SqlState::LOCK_NOT_AVAILABLE => {
            let reason = if buyer.wait.is_zero() {
                BusyReason::LockHeld
            } else {
                BusyReason::WaitTimedOut
            };
            Ok(PgAnswer::new(Outcome::Busy(reason)))
        }
        _ => Err(err.into()),
    }
}

pub(super) async fn set_lock_timeout(
    tx: &tokio_postgres::Transaction<'_>,
    wait: Duration,
) -> Result<(), PgError> {
    tx.batch_execute(&format!(
        "SET LOCAL lock_timeout = {}",
        wait.as_millis().max(1)
    ))
    .await?;
    Ok(())
}

pub(super) async fn work(buyer: &Buyer<'_>) {
    if !buyer.work.is_zero() {
        tokio::time::sleep(buyer.work).await;
    }
}
