//! One sale of a SKU whose stock lives in PostgreSQL, by each protocol.
//!
//! Every protocol but [`update`] runs the same section: read the stock,
//! do the business work, write back what was read minus one with the
//! sale's row. They differ in what surrounds it: a row lock
//! ([`for_update`]), an advisory lock on the SKU ([`advisory`]), a version
//! compared at the write ([`optimistic`]), or nothing ([`unprotected`],
//! which loses updates: the lesson's contrast). [`update`] is the
//! database's own atomic decrement, one statement, no section.
//!
//! Exactness, as in Redis's ledger: a request id's first answer is
//! written by the statement or transaction that decided it, and its key
//! lets only one attempt commit (a second waits on the key, then finds the
//! first's row and repeats its answer); an attempt whose commit was sent
//! and not answered is [`Outcome::Unknown`], and only the books (or a retry
//! with the id) can tell whether it sold. Everything before the commit
//! that fails leaves nothing behind: the database rolls the transaction
//! back.

use tokio_postgres::{Client, GenericClient};

use super::ids::{duplicate_id, record_sold_out, replay, replayed};
use super::statements::{
    bound_transaction, ended_idle, heard_work, lock_refused, sale_statement, sold_answer, sold_out,
    work, write_back,
};
use super::{Buyer, PgAnswer, PgError};
use crate::chaos::mutant::{self, Mutant};
use crate::gate::points;
use crate::lock::Hook;
use crate::outcome::{BusyReason, Outcome};

/// The request id's first answer, if the database gave one in the SKU's
/// current stocking: what a retry is told (`replayed`), nothing sold now.
pub async fn answered(
    c: &impl GenericClient,
    buyer: &Buyer<'_>,
) -> Result<Option<PgAnswer>, PgError> {
    replay(c, buyer).await
}

/// `pg-update`'s condition: the decrement takes a unit only where one is left.
const UNIT_LEFT: &str = "remaining > 0";

/// `pg-update`: the whole sale is one conditional `UPDATE` (with the
/// sale's row and the id's answer in the same statement): the database's
/// atomic decrement, the counterpart of `lua`.
pub async fn update(
    c: &impl GenericClient,
    buyer: &Buyer<'_>,
    hook: &Hook,
) -> Result<PgAnswer, PgError> {
    if let Some(answer) = replay(c, buyer).await? {
        return Ok(answer);
    }
    hook.at(points::BEFORE_WRITE).await;
    // The live mutant `no-stock-check` takes the condition out: the
    // decrement goes past zero.
    let unit_left = match mutant::on(Mutant::NoStockCheck) {
        true => "TRUE",
        false => UNIT_LEFT,
    };
    let sold = c
        .query_opt(
            &sale_statement("remaining - 1", unit_left, "remaining + 1"),
            &[&buyer.sku, &buyer.request_id, &buyer.instance],
        )
        .await;
    match sold {
        Ok(Some(row)) => Ok(sold_answer(row.try_get(0)?, row.try_get(1)?)),
        Ok(None) => sold_out(c, buyer).await,
        Err(err) if duplicate_id(&err) => replayed(c, buyer).await,
        // The statement commits itself: sent and not answered, it may have.
        Err(err) if err.as_db_error().is_none() => Ok(PgAnswer::new(Outcome::Unknown)),
        Err(err) => Err(err.into()),
    }
}

/// `pg-for-update`: the section under the stock row's lock (`SELECT …
/// FOR UPDATE`), held from the read to the commit; `wait` zero is `NOWAIT`.
pub async fn for_update(
    c: &mut Client,
    buyer: &Buyer<'_>,
    hook: &Hook,
) -> Result<PgAnswer, PgError> {
    if let Some(answer) = replay(&*c, buyer).await? {
        return Ok(answer);
    }
    let tx = c.transaction().await?;
    let locks = !mutant::on(Mutant::NoRowLock);
    bound_transaction(&tx, buyer, locks && !buyer.wait.is_zero()).await?;
    let lock = if !locks {
        ""
    } else if buyer.wait.is_zero() {
        " FOR UPDATE NOWAIT"
    } else {
        " FOR UPDATE"
    };
    let read = tx
        .query_opt(
            &format!("SELECT epoch, remaining FROM stock WHERE sku = $1{lock}"),
            &[&buyer.sku],
        )
        .await;
    let (epoch, remaining) = match read {
        Ok(Some(row)) => (row.try_get(0)?, row.try_get(1)?),
        Ok(None) => return Ok(PgAnswer::new(Outcome::NotStocked)),
        Err(err) => return lock_refused(err, buyer),
    };
    let entered = crate::timeline::now_ns();
    hook.at(points::AFTER_ACQUIRE).await;
    let decided = section(tx, buyer, hook, Some(entered), (epoch, remaining)).await?;
    answer_of(c, buyer, decided).await
}

/// `pg-advisory`: the section under a transaction-scoped advisory lock on
/// the SKU (the database as a lock store): released by the commit, or by
/// the end of the session if the instance dies holding it.
pub async fn advisory(c: &mut Client, buyer: &Buyer<'_>, hook: &Hook) -> Result<PgAnswer, PgError> {
    if let Some(answer) = replay(&*c, buyer).await? {
        return Ok(answer);
    }
    let tx = c.transaction().await?;
    let locks = !mutant::on(Mutant::NoAdvisoryLock);
    bound_transaction(&tx, buyer, locks && !buyer.wait.is_zero()).await?;
    if !locks {
        // No lock taken: the section below runs beside the others.
    } else if buyer.wait.is_zero() {
        let row = tx
            .query_one(
                "SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))",
                &[&buyer.sku],
            )
            .await?;
        if !row.try_get::<_, bool>(0)? {
            return Ok(PgAnswer::new(Outcome::Busy(BusyReason::LockHeld)));
        }
    } else {
        if let Err(err) = tx
            .execute(
                "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                &[&buyer.sku],
            )
            .await
        {
            return lock_refused(err, buyer);
        }
    }
    let entered = crate::timeline::now_ns();
    hook.at(points::AFTER_ACQUIRE).await;
    let Some(row) = tx
        .query_opt(
            "SELECT epoch, remaining FROM stock WHERE sku = $1",
            &[&buyer.sku],
        )
        .await?
    else {
        return Ok(PgAnswer::new(Outcome::NotStocked));
    };
    let read = (row.try_get(0)?, row.try_get(1)?);
    let decided = section(tx, buyer, hook, Some(entered), read).await?;
    answer_of(c, buyer, decided).await
}

/// `pg-optimistic`: read with the row's version, work, write only if the
/// version is still the one read; up to `tries` times, then `busy`
/// (`version_conflict`). No lock is held while working.
pub async fn optimistic(
    c: &impl GenericClient,
    buyer: &Buyer<'_>,
    hook: &Hook,
    tries: u32,
) -> Result<PgAnswer, PgError> {
    if let Some(answer) = replay(c, buyer).await? {
        return Ok(answer);
    }
    let mut conflicts = 0;
    for _ in 0..tries.max(1) {
        let Some(row) = c
            .query_opt(
                "SELECT remaining, version FROM stock WHERE sku = $1",
                &[&buyer.sku],
            )
            .await?
        else {
            return Ok(PgAnswer::new(Outcome::NotStocked));
        };
        let (remaining, version): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
        hook.at(points::AFTER_READ).await;
        if remaining <= 0 {
            let mut answer = record_sold_out(c, buyer, remaining).await?;
            answer.conflicts = conflicts;
            return Ok(answer);
        }
        work(buyer).await;
        hook.at(points::BEFORE_WRITE).await;
        let compare = match mutant::on(Mutant::NoVersionCheck) {
            false => "version = $5",
            true => "$5::bigint IS NOT NULL",
        };
        let sold = write_back(c, buyer, compare, remaining, version).await;
        let mut answer = match sold {
            Ok(Some(row)) => sold_answer(row.try_get(0)?, row.try_get(1)?),
            Ok(None) => {
                conflicts += 1;
                continue;
            }
            Err(err) if duplicate_id(&err) => replayed(c, buyer).await?,
            Err(err) if err.as_db_error().is_none() => PgAnswer::new(Outcome::Unknown),
            Err(err) => return Err(err.into()),
        };
        answer.conflicts = conflicts;
        return Ok(answer);
    }
    Ok(PgAnswer {
        conflicts,
        ..PgAnswer::new(Outcome::Busy(BusyReason::VersionConflict))
    })
}

/// The section with nothing around it, each statement its own
/// transaction: two buyers that read the same stock both write it minus
/// one, and one unit is sold twice. Not a variant: the contrast the
/// database's protocols are measured against.
pub async fn unprotected(
    c: &mut Client,
    buyer: &Buyer<'_>,
    hook: &Hook,
) -> Result<PgAnswer, PgError> {
    if let Some(answer) = replay(&*c, buyer).await? {
        return Ok(answer);
    }
    let Some(row) = c
        .query_opt(
            "SELECT epoch, remaining FROM stock WHERE sku = $1",
            &[&buyer.sku],
        )
        .await?
    else {
        return Ok(PgAnswer::new(Outcome::NotStocked));
    };
    let tx = c.transaction().await?;
    let read = (row.try_get(0)?, row.try_get(1)?);
    let decided = section(tx, buyer, hook, None, read).await?;
    answer_of(c, buyer, decided).await
}

/// The section after the read: the work, then the write of what was read
/// minus one (refused if the SKU was reset since the read), and the
/// commit. `read` is the epoch and the stock the read saw; `entered`,
/// when the lock was had (none: no lock).
async fn section(
    tx: tokio_postgres::Transaction<'_>,
    buyer: &Buyer<'_>,
    hook: &Hook,
    entered: Option<u64>,
    (epoch, remaining): (i64, i64),
) -> Result<Decided, PgError> {
    hook.at(points::AFTER_READ).await;
    if remaining <= 0 {
        let answer = record_sold_out(&tx, buyer, remaining).await?;
        return commit(tx, answer, hook, entered).await;
    }
    // Under a lock, the database hears the holder while it works; with
    // none (the contrast), there is nothing to keep.
    let heard = match entered {
        Some(_) => heard_work(&tx, buyer).await?,
        None => {
            work(buyer).await;
            std::time::Instant::now()
        }
    };
    hook.at(points::BEFORE_WRITE).await;
    let sold = write_back(&tx, buyer, "epoch = $5", remaining, epoch).await;
    let answer = match sold {
        Ok(Some(row)) => sold_answer(row.try_get(0)?, row.try_get(1)?),
        // Silent past its lease (frozen, cut off), the holder's session
        // was ended by the database: its lock was freed then and another
        // buyer may have sold since; this write is refused with the
        // session, and nothing was sold.
        Err(err) if entered.is_some() && ended_idle(&err, buyer, heard) => {
            return Ok(Decided::Answer(PgAnswer::new(Outcome::Busy(
                BusyReason::LockLost,
            ))));
        }
        Ok(None) => {
            return Ok(Decided::Answer(PgAnswer::new(Outcome::Busy(
                BusyReason::Reset,
            ))));
        }
        // Another attempt with the id committed first: this transaction
        // is void (rolled back as it is dropped); its answer is the other's.
        Err(err) if duplicate_id(&err) => return Ok(Decided::DuplicateId),
        Err(err) => return Err(err.into()),
    };
    commit(tx, answer, hook, entered).await
}

/// What the section decided.
enum Decided {
    Answer(PgAnswer),
    /// The id's answer was committed by another attempt first.
    DuplicateId,
}

/// The section's answer, or the id's answer another attempt committed.
async fn answer_of(c: &Client, buyer: &Buyer<'_>, decided: Decided) -> Result<PgAnswer, PgError> {
    match decided {
        Decided::Answer(answer) => Ok(answer),
        Decided::DuplicateId => replayed(c, buyer).await,
    }
}

/// Commits (which releases the lock had at `entered`); a commit sent and
/// not answered is `unknown`.
async fn commit(
    tx: tokio_postgres::Transaction<'_>,
    answer: PgAnswer,
    hook: &Hook,
    entered: Option<u64>,
) -> Result<Decided, PgError> {
    hook.at(points::BEFORE_RELEASE).await;
    // Taken before COMMIT is sent: from the lock's grant seen to here the
    // lock is surely held, so two such spans never overlap (the server
    // frees the lock at the commit, before its client hears of it).
    let exit = crate::timeline::now_ns();
    match tx.commit().await {
        Ok(()) => Ok(Decided::Answer(PgAnswer {
            held: entered.map(|at| (at, exit)),
            ..answer
        })),
        Err(err) if err.as_db_error().is_none() => {
            Ok(Decided::Answer(PgAnswer::new(Outcome::Unknown)))
        }
        Err(err) => Err(err.into()),
    }
}
