//! What the variants whose stock PostgreSQL keeps share: a connection from
//! the instance's pool, the buyer as [`crate::pgstock`] takes it, and its
//! answer as every variant gives it.

use super::About;
use crate::pgstock::{self, Buyer, PgAnswer};
use crate::section::{Answer, Ctx, Outcome};
use crate::store::StoreError;
use crate::timeline::Section;

/// Claims common to the database's variants in the scenarios whose fault
/// cannot reach a stock kept in PostgreSQL.
pub(super) const NOT_IN_REDIS: &str = "the stock is in PostgreSQL";

/// The buyer of `ctx`'s request.
pub(super) fn buyer<'a>(ctx: &'a Ctx<'_>, about: &About) -> Buyer<'a> {
    Buyer {
        sku: ctx.keys.tag.as_str(),
        request_id: ctx.request_id,
        instance: ctx.instance,
        work: ctx.knobs.work,
        wait: ctx.wait(about),
    }
}

/// A connection of the pool (the seller refused the request already when
/// the instance has no PostgreSQL).
pub(super) async fn connection(ctx: &Ctx<'_>) -> Result<deadpool_postgres::Object, StoreError> {
    let pool = ctx
        .stores
        .postgres
        .as_ref()
        .ok_or_else(|| unavailable(&"this instance has no PostgreSQL (--postgres-url)"))?;
    pool.get().await.map_err(|err| unavailable(&err))
}

/// PostgreSQL failed before a commit was sent: nothing was sold, 503.
pub(super) fn unavailable(err: &dyn std::fmt::Display) -> StoreError {
    super::lock_store_error("PostgreSQL", err)
}

/// The protocol's answer as the seller takes it: counted by the seller
/// (no script counted it), with the section a lock was held for.
pub(super) fn answer(
    ctx: &Ctx<'_>,
    result: Result<PgAnswer, pgstock::PgError>,
) -> Result<Answer, StoreError> {
    let answer = result.map_err(|err| unavailable(&err))?;
    // The lock's tenure, for the overlap witness: two never overlap.
    let witnessed = answer.held.map(|(enter_ns, exit_ns)| {
        let mut section = Section::timed(ctx.instance, None, enter_ns, answer.outcome.kind());
        section.exit_ns = exit_ns;
        section.release_ns = Some(exit_ns);
        section.request_id = ctx.request_id.map(str::to_owned);
        if let Outcome::Sold { unit, .. } = answer.outcome {
            section.unit = Some(unit);
        }
        Box::new(section)
    });
    Ok(Answer {
        replayed: answer.replayed,
        recorded: true,
        witnessed,
        ..Answer::unrecorded(answer.outcome)
    })
}
