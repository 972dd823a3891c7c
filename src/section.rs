//! The critical section every variant protects, written once.
//!
//! It is article 001's coupon sale, deliberately non-atomic:
//!
//! ```text
//! stock = GET stock:{sku}
//! if stock > 0:
//!     (business work: sleep work_ms)
//!     WRITE: SET stock:{sku} stock-1 and record the sale of unit `stock`
//! else
//!     -> sold out
//! ```
//!
//! Between the GET and the WRITE anything can happen; that gap is what
//! every variant tries to close. The WRITE itself is one script
//! (`sell.lua`) that sets the stock *and* records the sale in the ledger:
//! they happen together or not at all, so every change of the stock is a
//! recorded sale and `oversold = sold - (initial - remaining)` can never be
//! negative, whatever a variant gets wrong.
//!
//! Answers say only what is known. An error before the WRITE was sent means
//! nothing was sold (the caller answers 503 `store_unavailable`); an error
//! after it was sent (a timeout, a dropped connection) means nobody here
//! knows whether it happened: [`Outcome::Unknown`].

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;

use crate::chaos::Chaos;
use crate::chaos::mutant::{self, Mutant};
use crate::gate::points;
use crate::knobs::Knobs;
use crate::ledger::{self, AnswerKind, Claim};
use crate::lock::{Hook, LockStores, Wakeups};
use crate::store::{Conn, Keys, StoreError};
use crate::timeline;

/// What the section ends as, defined below the ledger (which records it)
/// and offered here, where every variant looks for it.
pub use crate::outcome::{Answer, BusyReason, Outcome};

/// What a variant says of the lock around the section (`guard.rs`).
pub use self::guard::{Fence, Guard, unguarded};

mod guard;

/// What a variant needs to run one request.
pub struct Ctx<'a> {
    pub conn: Conn,
    pub keys: &'a Keys,
    pub knobs: &'a Knobs,
    /// This instance's name, for owner tokens and the ledger.
    pub instance: &'a str,
    pub wakeups: &'a Wakeups,
    /// The lock stores beside the main Redis this instance was given.
    pub stores: &'a LockStores,
    /// The request's idempotency key, if it has one (the scripted
    /// variants check it inside their script).
    pub request_id: Option<&'a str>,
    /// How long request ids are remembered.
    pub request_ttl: Duration,
    /// How many request ids a SKU remembers at most.
    pub request_ids_per_sku: u64,
    /// The claim this attempt holds on its request id (taken before any
    /// lock): the section's write and answers settle it.
    pub claim: Option<Claim<'a>>,
    pub chaos: &'a Chaos,
    /// Where a scheduled request stops ([`crate::gate`]); none otherwise.
    pub hook: Hook,
    /// The scheduled buyer behind [`Ctx::hook`], to note what it read.
    pub gate: Option<std::sync::Arc<crate::gate::Gate>>,
    /// The schedule the request belongs to, when it stops at gates (an
    /// order's message carries it to the worker's gate).
    pub schedule: Option<&'a crate::knobs::Schedule>,
}

static SELL: LazyLock<Script> = LazyLock::new(|| {
    ledger::with_ledger(&format!(
        "{}\n{}",
        ledger::FENCE_LUA,
        include_str!("scripts/sell.lua")
    ))
});
static READ: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/read.lua")));
static FENCED_READ: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{}\n{}",
        ledger::FENCE_LUA,
        include_str!("variants/scripts/fenced_read.lua")
    ))
});

/// Runs the sale once, inside whatever the variant put around it.
///
/// - The write fails for an attempt whose request id's claim was taken
///   over (it outlived its deadline): it answers as the id stands.
/// - In chaos mode a pause armed by the lab freezes the whole process after
///   the last check of the lock, right before the write: the worst moment.
/// - The answers the section decides are counted in the ledger before it
///   returns (the sale by its own write, the rest right after), so a retry
///   waiting for the same lock finds the record.
pub async fn critical_section<F: Fn() -> bool>(
    ctx: &mut Ctx<'_>,
    guard: Guard<'_, F>,
) -> Result<Answer, StoreError> {
    ctx.hook.at(points::AFTER_ACQUIRE).await;
    let enter = timeline::now_ns();
    let answer = section(ctx, &guard).await;
    ctx.hook.at(points::BEFORE_RELEASE).await;
    let mut answer = answer?;
    if !answer.recorded {
        record_unrecorded(ctx, &answer).await;
        answer.recorded = true;
    }
    // Timed now, recorded after the lock is released (off the critical
    // path); a SKU never stocked leaves nothing behind, not even this.
    if answer.outcome != Outcome::NotStocked {
        answer.witnessed = Some(Box::new(witnessed(ctx, &guard, enter, &answer.outcome)));
    }
    Ok(answer)
}

/// The section as the timeline keeps it, ending now.
fn witnessed<F: Fn() -> bool>(
    ctx: &Ctx<'_>,
    guard: &Guard<'_, F>,
    enter: u64,
    outcome: &Outcome,
) -> timeline::Section {
    let mut section = ended_as(ctx, guard.holder, enter, outcome);
    section.lease_ms = guard.lease.map(|lease| lease.as_millis() as u64);
    section
}

/// A section of this request that entered at `enter_ns`, ends now and
/// ended as `outcome` (its unit, or why it was busy): the one way a
/// section is described, with a lock around it or inside a script.
pub fn ended_as(
    ctx: &Ctx<'_>,
    holder: Option<&str>,
    enter_ns: u64,
    outcome: &Outcome,
) -> timeline::Section {
    let mut section = timeline::Section::timed(ctx.instance, holder, enter_ns, outcome.kind());
    section.request_id = ctx.request_id.map(str::to_owned);
    match outcome {
        Outcome::Sold { unit, .. } => section.unit = Some(*unit),
        Outcome::Busy(reason) => section.reason = Some(reason.as_str().to_owned()),
        _ => {}
    }
    section
}

/// Records an answer nobody recorded: one the section decided without a
/// script, or one a variant gave without its section (the lock was not
/// had). Counts it, and settles the claim: a sold-out answer is kept for
/// retries, a busy one frees the id. The one place such an answer is
/// written to the ledger, for the section and the seller alike.
/// A failure here changes no answer (nothing was sold either way): it is
/// logged, and a claim left pending is taken over after its deadline.
pub async fn record_unrecorded(ctx: &mut Ctx<'_>, answer: &Answer) {
    let kind = match answer.outcome {
        _ if answer.replayed => AnswerKind::Replay,
        Outcome::SoldOut { .. } => AnswerKind::SoldOut,
        Outcome::Busy(_) => AnswerKind::Busy,
        // Sold is recorded by its write; unknown and not stocked are not answers the ledger counts.
        Outcome::Sold { .. } | Outcome::Unknown | Outcome::NotStocked => return,
    };
    // A replay answers from a claim that is not this attempt's: leave it be.
    let claim = ctx.claim.as_ref().filter(|_| !answer.replayed);
    if let Err(err) = ledger::record_answer(
        &mut ctx.conn,
        ctx.keys,
        (ctx.instance, kind),
        claim,
        &answer.outcome,
        ctx.request_ttl,
    )
    .await
    {
        tracing::warn!(%err, outcome = answer.outcome.kind(), "the answer could not be recorded");
    }
}

/// What the read found.
struct Read {
    stock: i64,
    /// The SKU's reset epoch; `None`: never stocked.
    epoch: Option<String>,
}

async fn read_stock(
    ctx: &mut Ctx<'_>,
    fence: Option<Fence<'_>>,
) -> Result<Option<Read>, StoreError> {
    let keys = ctx.keys;
    let (stock, epoch): (Option<i64>, Option<String>) = match fence {
        None => {
            READ.key(&keys.stock)
                .key(&keys.ledger)
                .invoke_async(&mut ctx.conn)
                .await?
        }
        Some(fence) => {
            let read: Option<(Option<i64>, Option<String>)> = FENCED_READ
                .key(&keys.stock)
                .key(&keys.ledger)
                .arg(fence.source)
                .arg(fence.store)
                .arg(fence.token)
                .invoke_async(&mut ctx.conn)
                .await?;
            match read {
                Some(read) => read,
                None => return Ok(None),
            }
        }
    };
    seam::after_read(&keys.tag).await;
    Ok(Some(Read {
        stock: stock.unwrap_or(0),
        epoch,
    }))
}

async fn section<F: Fn() -> bool>(
    ctx: &mut Ctx<'_>,
    guard: &Guard<'_, F>,
) -> Result<Answer, StoreError> {
    let unrecorded = |outcome| Ok(Answer::unrecorded(outcome));
    let Some(read) = read_stock(ctx, guard.fence).await? else {
        return unrecorded(Outcome::Busy(BusyReason::StaleToken));
    };
    let Some(epoch) = read.epoch else {
        return unrecorded(Outcome::NotStocked);
    };
    let current = read.stock;
    if let Some(gate) = &ctx.gate {
        gate.read(current).await;
    }
    if current <= 0 {
        return unrecorded(Outcome::SoldOut { remaining: current });
    }
    let faults = ctx.chaos.in_the_gap(&mut ctx.conn, ctx.keys).await?;
    ctx.hook.at(points::AFTER_READ).await;
    if !ctx.knobs.work.is_zero() {
        tokio::time::sleep(ctx.knobs.work).await;
    }
    ctx.hook.at(points::BEFORE_CHECK).await;
    if !(guard.still_held)() {
        return unrecorded(Outcome::Busy(BusyReason::LockLost));
    }
    if let Some(pause) = faults.pause {
        // After the last check, before the write: whatever the lock learns
        // while the process is frozen comes too late.
        let detail = format!("{} ms, right before the write", pause.as_millis());
        ctx.chaos
            .record(&mut ctx.conn, "freeze", Some(&ctx.keys.tag), &detail)
            .await;
        ctx.chaos.stop_the_world(pause);
    }
    ctx.hook.at(points::BEFORE_WRITE).await;
    let sale = write(ctx, current, &epoch, guard.fence).await;
    let (kind, record) = match sale {
        Ok(answer) => answer,
        Err(err) if nothing_sent(&err) => return Err(err),
        Err(err) => {
            tracing::warn!(%err, "the write was sent and no answer came: outcome unknown");
            return Ok(Answer::recorded(Outcome::Unknown, false));
        }
    };
    match kind.as_str() {
        "sold" => {
            if faults.crash_after_write {
                let when = "right after the write, before the answer";
                ctx.chaos
                    .crash_recorded(&mut ctx.conn, &ctx.keys.tag, when)
                    .await;
            }
            Ok(Answer::recorded(
                Outcome::Sold {
                    // A unit given back is sold before the one read.
                    unit: record.parse().unwrap_or(current),
                    remaining: current - 1,
                },
                false,
            ))
        }
        "stale" => unrecorded(Outcome::Busy(BusyReason::StaleToken)),
        "reset" => unrecorded(Outcome::Busy(BusyReason::Reset)),
        // A retry took the id over after this attempt's deadline: answer as
        // the id stands now, having sold nothing.
        _ => Ok(match Outcome::decode(&record) {
            Some(outcome) => Answer {
                replayed: true,
                ..Answer::unrecorded(outcome)
            },
            None => Answer::unrecorded(Outcome::Busy(BusyReason::InProgress)),
        }),
    }
}

/// The write: one script sets the stock to `unit - 1` and records the sale
/// of `unit`, or of a unit given back before it (with the request id's
/// outcome), if the SKU was not reset since the read, the claim is still
/// this attempt's and the fence admits the token. Returns the script's
/// verdict and the unit sold or, when the claim was lost, the id's record.
async fn write(
    ctx: &mut Ctx<'_>,
    unit: i64,
    epoch: &str,
    fence: Option<Fence<'_>>,
) -> Result<(String, String), StoreError> {
    let keys = ctx.keys;
    let claim = ctx.claim.as_ref();
    // A live mutant (debug builds only): the claim is no fence.
    if let Some(claim) = claim.filter(|_| mutant::on(Mutant::NoClaimFence)) {
        ledger::take_claim_back(&mut ctx.conn, keys, claim).await?;
    }
    Ok(SELL
        .key(&keys.stock)
        .key(&keys.ledger)
        .key(&keys.units)
        .key(&keys.served)
        .key(&keys.requests)
        .key(&keys.returned_units)
        .arg(unit - 1)
        .arg(unit)
        .arg(ctx.instance)
        .arg(epoch)
        .arg(claim.map_or("", |c| c.id))
        .arg(claim.map_or("", |c| c.token.as_str()))
        .arg(fence.map(|f| f.token.to_string()).unwrap_or_default())
        .arg(fence.map_or("", |f| f.source))
        .arg(fence.map_or("", |f| f.store))
        .invoke_async(&mut ctx.conn)
        .await?)
}

/// Whether a failed command certainly changed nothing: a refused
/// connection (it never reached Redis), Redis's own error reply (`ERR`):
/// every script here checks all that can fail before its first write, so a
/// script that answers an error wrote nothing; or `NOSCRIPT`, a script
/// Redis does not know and so never ran. A timeout or a dropped
/// connection may come after Redis ran the command, so it proves nothing.
pub fn nothing_sent(err: &StoreError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    err.0.is_connection_refusal()
        || err.0.kind() == ErrorKind::Server(ServerErrorKind::ResponseError)
        || err.0.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

/// A test's seam: a section of a SKU held right after its read (`seam.rs`).
#[doc(hidden)]
pub mod seam;

#[cfg(test)]
mod tests;
