//! Each request id's first answer: recorded by the statement or
//! transaction that decided it (its key lets only one attempt commit),
//! and repeated to every later attempt with the id in the SKU's epoch.

use tokio_postgres::GenericClient;
use tokio_postgres::error::SqlState;

use super::{Buyer, PgAnswer, PgError};
use crate::outcome::{BusyReason, Outcome};

/// A sold-out answer, recorded for the request id if there is one, and
/// only while the database has none left: a sold-out recorded is true of
/// the stock when it is recorded. An id answered meanwhile by another
/// attempt repeats that answer; a SKU restocked since the read (a reset)
/// records nothing and is `busy` (`reset`).
pub(super) async fn record_sold_out(
    c: &impl GenericClient,
    buyer: &Buyer<'_>,
    remaining: i64,
) -> Result<PgAnswer, PgError> {
    if let Some(id) = buyer.request_id {
        let recorded = c
            .query_opt(
                "INSERT INTO stock_requests (sku, epoch, request_id, outcome, remaining)
                 SELECT $1, epoch, $2, 'sold_out', $3 FROM stock
                 WHERE sku = $1 AND remaining <= 0
                 ON CONFLICT DO NOTHING RETURNING 1",
                &[&buyer.sku, &id, &remaining],
            )
            .await?;
        if recorded.is_none() {
            return replayed(c, buyer).await;
        }
    }
    Ok(PgAnswer::new(Outcome::SoldOut { remaining }))
}

/// The request id's recorded answer in the SKU's current epoch, if any.
pub(super) async fn replay(
    c: &impl GenericClient,
    buyer: &Buyer<'_>,
) -> Result<Option<PgAnswer>, PgError> {
    let Some(id) = buyer.request_id else {
        return Ok(None);
    };
    let row = c
        .query_opt(
            "SELECT r.outcome, r.unit, r.remaining
             FROM stock_requests r JOIN stock s ON s.sku = r.sku AND s.epoch = r.epoch
             WHERE r.sku = $1 AND r.request_id = $2",
            &[&buyer.sku, &id],
        )
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let (outcome, unit, remaining): (String, Option<i64>, i64) =
        (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
    Ok(Some(PgAnswer {
        outcome: recorded(&outcome, unit, remaining),
        replayed: true,
        conflicts: 0,
        held: None,
    }))
}

/// An id's answer as `stock_requests` keeps it (`sold` with its unit, or
/// `sold_out`), back as the outcome it was.
pub(super) fn recorded(outcome: &str, unit: Option<i64>, remaining: i64) -> Outcome {
    match (outcome, unit) {
        ("sold", Some(unit)) => Outcome::Sold { unit, remaining },
        _ => Outcome::SoldOut { remaining },
    }
}

/// The answer of an attempt whose id another attempt answered first (or
/// whose sold-out found the SKU restocked).
pub(super) async fn replayed(
    c: &impl GenericClient,
    buyer: &Buyer<'_>,
) -> Result<PgAnswer, PgError> {
    match replay(c, buyer).await? {
        Some(answer) => Ok(answer),
        // The other attempt's answer belongs to an epoch since replaced.
        None => Ok(PgAnswer::new(Outcome::Busy(BusyReason::Reset))),
    }
}

/// Whether `err` is the request id's key refusing a second answer.
pub(super) fn duplicate_id(err: &tokio_postgres::Error) -> bool {
    err.as_db_error().is_some_and(|db| {
        db.code() == &SqlState::UNIQUE_VIOLATION && db.table() == Some("stock_requests")
    })
}
