//! What the variants whose stock PostgreSQL keeps share: a connection from
//! the instance's pool, the buyer as [`crate::pgstock`] takes it, and its
//! answer as every variant gives it.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::About;
use crate::chaos::Chaos;
use crate::gate::points;
use crate::lock::{Held, Hook, Point, Reached};
use crate::pgstock::{self, Buyer, PgAnswer};
use crate::section::{Answer, Ctx, Outcome};
use crate::store::StoreError;
use crate::store::{Conn, Keys};
use crate::timeline::Section;

/// The buyer of `ctx`'s request.
pub(super) fn buyer<'a>(ctx: &'a Ctx<'_>, about: &About) -> Buyer<'a> {
    // The live mutant `no-id-record` (debug builds only) hides the id from
    // the database: nothing looked up, nothing recorded.
    let no_record = crate::chaos::mutant::on(crate::chaos::mutant::Mutant::NoIdRecord);
    Buyer {
        sku: ctx.keys.tag.as_str(),
        request_id: ctx.request_id.filter(|_| !no_record),
        instance: ctx.instance,
        work: ctx.knobs.work,
        wait: ctx.wait(about),
        lease: ctx.lease(about),
    }
}

/// The instance's pool of connections (the seller refused the request
/// already when the instance has no PostgreSQL).
pub(super) fn pool<'a>(ctx: &'a Ctx<'_>) -> Result<&'a pgstock::Pool, StoreError> {
    (ctx.stores.postgres.as_ref())
        .ok_or_else(|| unavailable(&"this instance has no PostgreSQL (--postgres-url)"))
}

/// A connection of the pool.
pub(super) async fn connection(ctx: &Ctx<'_>) -> Result<deadpool_postgres::Object, StoreError> {
    pool(ctx)?.get().await.map_err(|err| unavailable(&err))
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

/// The hook a database lock's section runs with: in chaos mode, at
/// `after_read` (the lock held, the stock read) it announces the section
/// and takes what was armed, as the Redis locks' section does: a crash
/// right after acquiring strikes there, a pause right before the write;
/// then, at every point, the request's own hook (its schedule's gates).
/// Outside chaos mode, the request's hook alone.
pub(super) fn with_chaos(ctx: &Ctx<'_>) -> Hook {
    if !ctx.chaos.enabled() {
        return ctx.hook.clone();
    }
    Hook::new(Arc::new(ChaosAtSection {
        inner: ctx.hook.clone(),
        chaos: ctx.chaos.clone(),
        conn: ctx.conn.clone(),
        keys: ctx.keys.clone(),
        pause: Mutex::new(None),
    }))
}

struct ChaosAtSection {
    inner: Hook,
    chaos: Chaos,
    conn: Conn,
    keys: Keys,
    /// A pause taken at `after_read`, struck at `before_write`.
    pause: Mutex<Option<Duration>>,
}

impl Reached for ChaosAtSection {
    fn reached(&self, point: Point) -> Held<'_> {
        Box::pin(async move {
            let mut conn = self.conn.clone();
            if point == points::AFTER_READ {
                match self.chaos.in_the_gap(&mut conn, &self.keys).await {
                    Ok(faults) => {
                        *self.pause.lock().unwrap_or_else(PoisonError::into_inner) = faults.pause;
                    }
                    Err(err) => tracing::warn!(%err, "chaos faults could not be read"),
                }
            } else if point == points::BEFORE_WRITE {
                let pause = self
                    .pause
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                if let Some(pause) = pause {
                    let detail = format!("{} ms, right before the write", pause.as_millis());
                    let sku = Some(self.keys.tag.as_str());
                    self.chaos.record(&mut conn, "freeze", sku, &detail).await;
                    self.chaos.stop_the_world(pause);
                }
            }
            self.inner.at(point).await;
        })
    }
}
