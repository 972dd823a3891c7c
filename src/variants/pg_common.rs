//! What the variants whose stock PostgreSQL keeps share: a connection from
//! the instance's pool, the buyer as [`crate::pgstock`] takes it, and its
//! answer as every variant gives it.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::{About, Claim, Claims};
use crate::chaos::Chaos;
use crate::gate::points;
use crate::lock::{Held, Hook, Point, Reached};
use crate::pgstock::{self, Buyer, PgAnswer};
use crate::section::{Answer, Ctx, Outcome};
use crate::store::StoreError;
use crate::store::{Conn, Keys};
use crate::timeline::Section;

/// Claims common to the database's variants in the scenarios whose fault
/// cannot reach a stock kept in PostgreSQL.
pub(super) const NOT_IN_REDIS: &str = "the stock is in PostgreSQL";

/// The database's variants when a commit's answer is lost: the buyer is
/// told `unknown`, and its id's record answers its retry.
pub(super) const ANSWERED_ON_RETRY: &str = "unknown, then its id's record";

/// The database's variants when PostgreSQL crashes under their buyers.
pub(super) const SURVIVES_A_CRASH: &str = "committed or rolled back; each id resolves";

/// Why a dead holder's database lock frees itself: its transaction is
/// rolled back, and its lock released, as its connection closes.
pub(super) const DIES_WITH_ITS_CONNECTION: &str = "the transaction dies with its connection";

/// The claims of the database's locks (`pg-for-update`, `pg-advisory`),
/// one for both: a lock its transaction holds, with no lease, freed when
/// its holder's connection closes (their model: `check/model/transaction.rs`).
/// `slow_business`: why the work stays under the lock, in the variant's words.
pub(super) const fn transaction_lock_claims(slow_business: &'static str) -> Claims {
    Claims {
        one_instance: Claim::not_applicable("adds nothing to the race"),
        race: Claim::safe(""),
        slow_business: Claim::safe(slow_business),
        crash_after_acquire: Claim::frees(DIES_WITH_ITS_CONNECTION),
        pause_holder: Claim::safe("no lease to run out"),
        kill_instance: Claim::frees(DIES_WITH_ITS_CONNECTION),
        lock_vanishes_early: Claim::not_applicable(NOT_IN_REDIS),
        lock_vanishes: Claim::not_applicable(NOT_IN_REDIS),
        retry_storm: Claim::safe("one sale per request_id"),
        clock_skew: Claim::not_applicable("no lease"),
        redis_restart: Claim::not_applicable(NOT_IN_REDIS),
        redis_pause: Claim::not_applicable(NOT_IN_REDIS),
        redlock_minority_down: Claim::NOT_APPLICABLE,
        redlock_majority_down: Claim::NOT_APPLICABLE,
        redlock_restart_without_persistence: Claim::NOT_APPLICABLE,
        failover: Claim::not_applicable(NOT_IN_REDIS),
        failover_wait_early: Claim::NOT_APPLICABLE,
        failover_wait: Claim::NOT_APPLICABLE,
        crash_before_enqueue: Claim::NOT_APPLICABLE,
        worker_crash_before_ack: Claim::NOT_APPLICABLE,
        postgres_restart: Claim::safe(SURVIVES_A_CRASH),
        commit_answer_lost: Claim::safe(ANSWERED_ON_RETRY),
        reservation_expiry: Claim::NOT_APPLICABLE,
        redis_data_loss: Claim::not_applicable(NOT_IN_REDIS),
    }
}

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
