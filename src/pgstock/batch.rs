//! `pg-batch`'s sale: the buyers of one SKU queued at an instance decided
//! in one transaction, each answered exactly as `pg-update` answers it
//! alone, one after the other in queue order.
//!
//! The transaction takes the stock row's lock and reads it (`SELECT …
//! FOR UPDATE`), then looks up the request ids' recorded answers: a
//! statement after the lock was granted, so it sees every answer any
//! other batch committed before. The batch is decided here, in order
//! ([`decide`]): an id already answered (in the database, or earlier in
//! the batch) is replayed; otherwise a unit while the stock read has one,
//! a sold-out answer once it has none. One statement then writes it all:
//! the row's `remaining` set to what was read less the units taken, the
//! sales' rows and the ids' answers inserted from arrays (`unnest`). The
//! commit makes them visible together and lets the row go. Without the
//! row's lock (the live mutant `no-row-lock`), two batches read the same
//! stock and both write it less their own: units sold twice.
//!
//! A commit sent and not answered leaves every buyer the batch decided
//! `unknown` (their ids resolve on a retry); a replayed buyer's answer was
//! read from a record already committed, and stands.

use std::collections::HashMap;

use deadpool_postgres::ClientWrapper;
use tokio_postgres::types::ToSql;

use super::ids::duplicate_id;
use super::{PgAnswer, PgError};
use crate::chaos::mutant::{self, Mutant};
use crate::gate::points;
use crate::lock::Hook;
use crate::outcome::{BusyReason, Outcome};

/// How often a batch is tried again when an id's key refused its write
/// (another variant's attempt of the same id, on the same SKU, committed
/// between the look-up and the write: only a seller outside the batches
/// can, since every batch looks up under the row's lock).
const TRIES: usize = 3;

/// What [`decide`] made of a batch: each buyer's answer, the units sold
/// (with their buyers' ids) and the ids' answers to record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// Each buyer's answer in queue order, and whether it is a replay.
    pub answers: Vec<(Outcome, bool)>,
    /// The units sold, in order, and each one's request id.
    pub sales: Vec<(i64, Option<String>)>,
    /// The answers to record: id, `sold` or `sold_out`, unit, remaining.
    pub records: Vec<(String, &'static str, Option<i64>, i64)>,
    /// The stock after the batch.
    pub remaining: i64,
}

/// Decides a batch on the stock read (`remaining`), the ids' answers
/// already recorded in the SKU's epoch (`recorded`) and the buyers' ids in
/// queue order: what `pg-update` answers each buyer alone, one after the
/// other.
pub fn decide(
    remaining: i64,
    recorded: &HashMap<String, Outcome>,
    ids: &[Option<&str>],
) -> Decision {
    let mut d = Decision {
        remaining,
        ..Decision::default()
    };
    let mut answered: HashMap<&str, Outcome> = HashMap::new();
    for &id in ids {
        if let Some(id) = id
            && let Some(&first) = answered.get(id).or_else(|| recorded.get(id))
        {
            d.answers.push((first, true));
            continue;
        }
        let outcome = if d.remaining > 0 {
            let unit = d.remaining;
            d.remaining -= 1;
            d.sales.push((unit, id.map(str::to_owned)));
            Outcome::Sold {
                unit,
                remaining: d.remaining,
            }
        } else {
            Outcome::SoldOut {
                remaining: d.remaining,
            }
        };
        if let Some(id) = id {
            let (kind, unit) = match outcome {
                Outcome::Sold { unit, .. } => ("sold", Some(unit)),
                _ => ("sold_out", None),
            };
            d.records.push((id.to_owned(), kind, unit, d.remaining));
            answered.insert(id, outcome);
        }
        d.answers.push((outcome, false));
    }
    d
}

/// The batch's one write: the row set to what was read (`$2`) less the
/// units taken (`$3`), where the epoch is still the one read (`$4`); the
/// sales' rows (units `$6`, ids `$7`, numbered after the row's `sold`)
/// and the ids' answers (`$8` to `$11`). Returns a row when the stock's
/// row was written.
pub const WRITE: &str = "WITH s AS (
        UPDATE stock SET remaining = $2::bigint - $3::bigint, sold = sold + $3, version = version + $3
        WHERE sku = $1 AND epoch = $4::bigint
        RETURNING epoch, sold
    ), sale AS (
        INSERT INTO stock_sales (sku, epoch, sale, unit, request_id, instance)
        SELECT $1, s.epoch, s.sold - $3 + u.k, u.unit, u.id, $5::text
        FROM s, unnest($6::bigint[], $7::text[]) WITH ORDINALITY AS u(unit, id, k)
    ), answer AS (
        INSERT INTO stock_requests (sku, epoch, request_id, outcome, unit, remaining)
        SELECT $1, s.epoch, a.id, a.outcome, a.unit, a.remaining
        FROM s, unnest($8::text[], $9::text[], $10::bigint[], $11::bigint[])
            AS a(id, outcome, unit, remaining)
    )
    SELECT 1 FROM s";

/// The ids' answers recorded in the SKU's current epoch: run once the
/// row's lock is granted, in a snapshot taken then.
const LOOKUP: &str = "SELECT r.request_id, r.outcome, r.unit, r.remaining
    FROM stock_requests r JOIN stock s ON s.sku = r.sku AND s.epoch = r.epoch
    WHERE r.sku = $1 AND r.request_id = ANY($2)";

/// Sells to the buyers `ids` (their request ids, in queue order) of `sku`
/// at `instance`, in one transaction: each buyer's answer, in order. A
/// scheduled buyer's `hook` stops the batch at its gates: after the read,
/// before the write and before the commit.
pub async fn sell(
    c: &mut ClientWrapper,
    sku: &str,
    instance: &str,
    ids: &[Option<&str>],
    hook: &Hook,
) -> Result<Vec<PgAnswer>, PgError> {
    sell_with(c, (sku, instance), ids, hook, WRITE).await
}

/// [`sell`] with the batch's write statement given: a test's mutated one.
#[doc(hidden)]
pub async fn sell_with(
    c: &mut ClientWrapper,
    (sku, instance): (&str, &str),
    ids: &[Option<&str>],
    hook: &Hook,
    write: &str,
) -> Result<Vec<PgAnswer>, PgError> {
    let mut tries = 0;
    loop {
        match attempt(c, (sku, instance), ids, hook, write).await {
            Err(err) if duplicate_id(&err.0) && tries + 1 < TRIES => tries += 1,
            result => return result,
        }
    }
}

/// One try of the batch's transaction.
async fn attempt(
    c: &mut ClientWrapper,
    (sku, instance): (&str, &str),
    ids: &[Option<&str>],
    hook: &Hook,
    write: &str,
) -> Result<Vec<PgAnswer>, PgError> {
    let tx = c.transaction().await?;
    let lock = match mutant::on(Mutant::NoRowLock) {
        true => "",
        false => " FOR UPDATE",
    };
    let wanted: Vec<&str> = ids.iter().flatten().copied().collect();
    // Sent together: the look-up runs once the lock is granted, in a
    // snapshot of its own taken then.
    // Each statement prepared once per connection (its cache): a batch
    // then costs the server no parsing or planning, and one round trip each.
    let read = format!("SELECT epoch, remaining FROM stock WHERE sku = $1{lock}");
    let (read, lookup) = tokio::try_join!(tx.prepare_cached(&read), tx.prepare_cached(LOOKUP))?;
    let (read_params, lookup_params): ([&(dyn ToSql + Sync); 1], [&(dyn ToSql + Sync); 2]) =
        ([&sku], [&sku, &wanted]);
    let (row, rows) = tokio::try_join!(
        tx.query_opt(&read, &read_params),
        tx.query(&lookup, &lookup_params),
    )?;
    let Some(row) = row else {
        return Ok(ids
            .iter()
            .map(|_| PgAnswer::new(Outcome::NotStocked))
            .collect());
    };
    let entered = crate::timeline::now_ns();
    let (epoch, remaining): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
    let mut recorded = HashMap::new();
    for row in rows {
        let (id, outcome, unit, remaining): (String, String, Option<i64>, i64) = (
            row.try_get(0)?,
            row.try_get(1)?,
            row.try_get(2)?,
            row.try_get(3)?,
        );
        recorded.insert(id, super::ids::recorded(&outcome, unit, remaining));
    }
    hook.at(points::AFTER_READ).await;
    let decision = decide(remaining, &recorded, ids);
    hook.at(points::BEFORE_WRITE).await;
    if !decision.sales.is_empty() || !decision.records.is_empty() {
        let taken = decision.sales.len() as i64;
        let units: Vec<i64> = decision.sales.iter().map(|(unit, _)| *unit).collect();
        let sold_to: Vec<Option<&str>> =
            decision.sales.iter().map(|(_, id)| id.as_deref()).collect();
        let r = &decision.records;
        let record_ids: Vec<&str> = r.iter().map(|(id, ..)| id.as_str()).collect();
        let kinds: Vec<&str> = r.iter().map(|(_, kind, ..)| *kind).collect();
        let record_units: Vec<Option<i64>> = r.iter().map(|(_, _, unit, _)| *unit).collect();
        let left: Vec<i64> = r.iter().map(|(.., remaining)| *remaining).collect();
        let write = tx.prepare_cached(write).await?;
        let written = tx
            .query_opt(
                &write,
                &[
                    &sku,
                    &remaining,
                    &taken,
                    &epoch,
                    &instance,
                    &units,
                    &sold_to,
                    &record_ids,
                    &kinds,
                    &record_units,
                    &left,
                ],
            )
            .await?;
        if written.is_none() {
            // The SKU was stocked again since the read (only possible
            // without the row's lock): nothing written, nothing sold.
            return Ok(ids
                .iter()
                .map(|_| PgAnswer::new(Outcome::Busy(BusyReason::Reset)))
                .collect());
        }
    }
    hook.at(points::BEFORE_RELEASE).await;
    // Taken before COMMIT is sent: the row is surely locked until here.
    let exit = crate::timeline::now_ns();
    let committed = match tx.commit().await {
        Ok(()) => true,
        Err(err) if err.as_db_error().is_none() => false,
        Err(err) => return Err(err.into()),
    };
    let mut answers: Vec<PgAnswer> = decision
        .answers
        .into_iter()
        .map(|(outcome, replayed)| match (committed, replayed) {
            (false, false) => PgAnswer::new(Outcome::Unknown),
            _ => PgAnswer {
                replayed,
                ..PgAnswer::new(outcome)
            },
        })
        .collect();
    // The row's lock, held once for the batch: its first buyer's section.
    if committed && let Some(first) = answers.first_mut() {
        first.held = Some((entered, exit));
    }
    Ok(answers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sold(unit: i64, remaining: i64) -> Outcome {
        Outcome::Sold { unit, remaining }
    }

    #[test]
    fn a_batch_straddling_the_last_units_sells_them_in_order_then_refuses() {
        let d = decide(2, &HashMap::new(), &[Some("a"), None, Some("c"), Some("a")]);
        assert_eq!(
            d.answers,
            [
                (sold(2, 1), false),
                (sold(1, 0), false),
                (Outcome::SoldOut { remaining: 0 }, false),
                (sold(2, 1), true),
            ]
        );
        assert_eq!(d.sales, [(2, Some("a".to_owned())), (1, None)]);
        assert_eq!(
            d.records,
            [
                ("a".to_owned(), "sold", Some(2), 1),
                ("c".to_owned(), "sold_out", None, 0)
            ]
        );
        assert_eq!(d.remaining, 0);
    }

    #[test]
    fn an_id_answered_before_is_replayed_and_takes_nothing() {
        let recorded = HashMap::from([("x".to_owned(), Outcome::SoldOut { remaining: 0 })]);
        let d = decide(5, &recorded, &[Some("x"), Some("y")]);
        assert_eq!(
            d.answers,
            [
                (Outcome::SoldOut { remaining: 0 }, true),
                (sold(5, 4), false)
            ]
        );
        assert_eq!(d.records.len(), 1, "only y's answer is new");
    }

    #[test]
    fn an_oversold_stock_answers_sold_out_with_what_it_holds() {
        let d = decide(-2, &HashMap::new(), &[None, Some("z")]);
        assert_eq!(
            d.answers,
            [
                (Outcome::SoldOut { remaining: -2 }, false),
                (Outcome::SoldOut { remaining: -2 }, false)
            ]
        );
        assert!(d.sales.is_empty());
    }
}
