//! The pieces the protocols of [`sale`](super::sale) share: the sale's
//! statement (the stock's update, the sale's row and the id's answer in
//! one), the section's write, the answers built from a row, the lock's
//! refusal and timeout, and the business work.

use std::time::{Duration, Instant};

use tokio_postgres::GenericClient;
use tokio_postgres::error::SqlState;

use super::ids::record_sold_out;
use super::{Buyer, PgAnswer, PgError};
use crate::chaos::mutant::{self, Mutant};
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

/// Bounds a database lock's transaction, first thing in it: how long it
/// waits for its lock (`lock_timeout`; `waits` false: NOWAIT, or a
/// try-lock, none needed) and how long it may hold it in silence
/// (`idle_in_transaction_session_timeout`, the buyer's lease). A holder the
/// database stops hearing from (frozen, cut off by a partition, its host
/// gone without a FIN) is ended by PostgreSQL once that long passed since
/// its last statement: the session closes, its transaction rolls back and
/// its lock is free, within the lease rather than the operating system's
/// TCP keepalive (about two hours).
pub(super) async fn bound_transaction(
    tx: &tokio_postgres::Transaction<'_>,
    buyer: &Buyer<'_>,
    waits: bool,
) -> Result<(), PgError> {
    // The live mutant `no-idle-timeout` sets the server's 0: never.
    let idle_ms = match mutant::on(Mutant::NoIdleTimeout) {
        true => 0,
        false => buyer.lease.as_millis().max(1),
    };
    let mut sql = format!("SET LOCAL idle_in_transaction_session_timeout = {idle_ms}");
    if waits {
        sql += &format!(
            "; SET LOCAL lock_timeout = {}",
            buyer.wait.as_millis().max(1)
        );
    }
    tx.batch_execute(&sql).await?;
    Ok(())
}

pub(super) async fn work(buyer: &Buyer<'_>) {
    if !buyer.work.is_zero() {
        tokio::time::sleep(buyer.work).await;
    }
}

/// The business work of a holder of a database lock, heard by the
/// database: every third of its lease it sends the transaction a
/// `SELECT 1`, so that a holder slower than its lease but alive keeps its
/// lock (the watchdog of a Redis lock, for a lock whose lease is the
/// session's idle timeout). Returns when its connection was last heard
/// from (an answer came).
pub(super) async fn heard_work(
    tx: &tokio_postgres::Transaction<'_>,
    buyer: &Buyer<'_>,
) -> Result<Instant, PgError> {
    let mut heard = Instant::now();
    if buyer.work.is_zero() {
        return Ok(heard);
    }
    let every = (buyer.lease / 3).max(Duration::from_millis(1));
    let done = tokio::time::sleep(buyer.work);
    tokio::pin!(done);
    let mut beat = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        tokio::select! {
            () = &mut done => return Ok(heard),
            _ = beat.tick() => {
                tx.batch_execute("SELECT 1").await?;
                heard = Instant::now();
            }
        }
    }
}

/// Whether `err` is PostgreSQL having ended a holder's session for its
/// silence: the idle timeout's own error, or the connection found closed
/// after a silence of at least the lease (`heard`: when it was last heard).
pub(super) fn ended_idle(err: &tokio_postgres::Error, buyer: &Buyer<'_>, heard: Instant) -> bool {
    err.code() == Some(&SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT)
        || (err.is_closed() && heard.elapsed() >= buyer.lease)
}
