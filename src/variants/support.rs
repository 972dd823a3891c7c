//! What the lock variants share around their critical section: the
//! answers they give when no lock was had, the clean-up after it, the
//! metrics of a wait and a hold, and the naive locks' polling.

use std::fmt;
use std::time::{Duration, Instant};

use super::Variant;
use crate::metrics::WaitOutcome;
use crate::section::{Answer, BusyReason, Ctx, Fence, Outcome};
use crate::store::{Keys, StoreError};

/// The error of a lock variant whose store this instance was not given
/// (the seller refuses such requests first: this is a second line).
pub(super) fn unconfigured(store: &str, flag: &str) -> StoreError {
    StoreError(redis::RedisError::from((
        redis::ErrorKind::InvalidClientConfig,
        "lock store not configured",
        format!("{store}: this instance was started without {flag}"),
    )))
}

/// A lock store (etcd, ZooKeeper) failed in a way that is not "busy": a
/// 503 whose detail names the store.
pub(super) fn lock_store_error(store: &str, err: &dyn std::fmt::Display) -> StoreError {
    StoreError(redis::RedisError::from((
        redis::ErrorKind::Io,
        "lock store unavailable",
        format!("{store}: {err}"),
    )))
}

/// After a lock was released: counts its lease's renewals and, when it
/// was lost while held, a lost lock (metrics and the SKU's ledger).
pub(super) async fn count_tenure(
    ctx: &mut Ctx<'_>,
    variant: Variant,
    renewals: u64,
    lost: bool,
) -> Result<(), StoreError> {
    if renewals > 0 {
        crate::metrics::renewals(variant.name(), renewals);
        crate::ledger::add(
            &mut ctx.conn,
            ctx.keys,
            crate::ledger::Counter::Renewals,
            renewals,
        )
        .await?;
    }
    if lost {
        crate::metrics::lost(variant.name());
        crate::ledger::add(
            &mut ctx.conn,
            ctx.keys,
            crate::ledger::Counter::LostLocks,
            1,
        )
        .await?;
    }
    Ok(())
}

/// `replicas=N`: once the lock is taken on the main Redis, `WAIT`s up to
/// [`crate::knobs::REPLICA_WAIT`] for N replicas to have it. `true` when
/// they do (or none was asked for). WAIT blocks the connection it is sent
/// on, so the requests sharing it wait as long: the price of asking.
///
/// `WAIT` counts the replicas that have every write the master has, not
/// the lock: a master that failed over between the lock and the `WAIT`
/// took the lock with it, and the new master's replica has all the new
/// master has. So once enough replicas answered, the lock must still be
/// the owner's (`still_ours`, asked of the master now).
pub(super) async fn replicated(
    ctx: &mut Ctx<'_>,
    still_ours: impl std::future::Future<Output = Result<bool, crate::lock::Error>>,
) -> Result<bool, StoreError> {
    let Some(wanted) = ctx.knobs.replicas.filter(|n| *n > 0).map(i64::from) else {
        return Ok(true);
    };
    ctx.hook.at(crate::gate::points::BEFORE_WAIT).await;
    let acked =
        crate::store::wait_replicas(&mut ctx.conn, wanted, crate::knobs::REPLICA_WAIT).await?;
    if acked < wanted {
        tracing::warn!(
            acked,
            wanted,
            "the lock did not reach enough replicas; released"
        );
        return Ok(false);
    }
    if !still_ours.await? {
        tracing::warn!("the lock was lost before it reached a replica (a failover); given up");
        return Ok(false);
    }
    Ok(true)
}

/// The answer of a lock released because too few replicas had it.
pub(super) fn not_replicated() -> Result<Answer, StoreError> {
    Ok(Answer::unrecorded(Outcome::Busy(BusyReason::NotReplicated)))
}

/// The critical section under a lock whose own store issued `fence`
/// (etcd's revision, ZooKeeper's zxid): the stock is read and written
/// through the fenced scripts, which refuse a token older than the newest
/// they have seen from the same source and store.
pub(super) async fn fenced_section(
    ctx: &mut Ctx<'_>,
    fence: Fence<'_>,
    still_held: impl Fn() -> bool,
) -> Result<Answer, StoreError> {
    let holder = format!(
        "{}#{}",
        crate::lock::OwnerId::new(ctx.instance),
        fence.token
    );
    // The live mutant `no-fence` (debug builds only) takes the store's
    // fence out: plain reads, unfenced writes.
    let fenced = !crate::chaos::mutant::on(crate::chaos::mutant::Mutant::NoFence);
    let guard = crate::section::Guard {
        holder: Some(&holder),
        fence: fenced.then_some(fence),
        still_held,
        lease: None,
    };
    crate::section::critical_section(ctx, guard).await
}

/// A busy answer (not counted yet) that says whether the request waited at all.
pub(super) fn not_acquired(wait: Duration) -> Result<Answer, StoreError> {
    Ok(Answer::unrecorded(Outcome::Busy(if wait.is_zero() {
        BusyReason::LockHeld
    } else {
        BusyReason::WaitTimedOut
    })))
}

/// The section's answer, whatever the clean-up after it (release, publish,
/// counting renewals) met: once a sale is written, a failed release leaves
/// a lease to run out, never an answer that hides the sale.
pub(super) fn after_release<T, E: fmt::Display>(
    answer: Result<Answer, StoreError>,
    cleanup: Result<T, E>,
    what: &str,
) -> Result<Answer, StoreError> {
    if let Err(err) = cleanup {
        tracing::warn!(%err, "{what} failed after the section; its answer stands");
    }
    answer
}

/// Measures, for the metrics, how long a request waited for its lock (and
/// how the wait ended), how long it held it, and counts it among the
/// lock's waiters while it waits.
pub(super) struct LockTimer {
    variant: &'static str,
    started: Instant,
    /// `Some` while the request waits: it counts in the waiters gauge.
    waiting: Option<crate::metrics::Waiting>,
    acquired: Option<Instant>,
}

impl LockTimer {
    /// The request starts waiting for the lock of `keys`' SKU.
    pub(super) fn start(variant: Variant, keys: &Keys) -> Self {
        Self {
            variant: variant.name(),
            started: Instant::now(),
            waiting: Some(crate::metrics::waiting(variant.name(), &keys.tag)),
            acquired: None,
        }
    }

    /// The wait is over, with or without the lock.
    pub(super) fn waited(&mut self, got_it: bool) {
        let outcome = if got_it {
            WaitOutcome::Acquired
        } else {
            WaitOutcome::GaveUp
        };
        self.wait_over(outcome);
    }

    fn wait_over(&mut self, outcome: WaitOutcome) {
        if self.waiting.take().is_none() {
            return;
        }
        let now = Instant::now();
        crate::metrics::lock_waited(self.variant, outcome, now - self.started);
        if outcome == WaitOutcome::Acquired {
            self.acquired = Some(now);
        }
    }

    pub(super) fn released(&self) {
        if let Some(acquired) = self.acquired {
            crate::metrics::lock_hold(self.variant, acquired.elapsed());
        }
    }
}

impl Drop for LockTimer {
    /// A wait left without [`LockTimer::waited`] ended in a store error (a
    /// `?` while waiting): counted as such, and no longer a waiter.
    fn drop(&mut self) {
        self.wait_over(WaitOutcome::Error);
    }
}

/// How naive locks wait: try, sleep 10 ms, try again, until `wait` is over
/// (the better locks are woken by pub/sub instead).
pub(super) struct Spin {
    deadline: tokio::time::Instant,
    timer: LockTimer,
    /// Where a scheduled request notes each wait (an explorer's, a
    /// replay's): it then knows the buyer waits for the lock, not that it
    /// is slow.
    hook: crate::lock::Hook,
}

impl Spin {
    const EVERY: Duration = Duration::from_millis(10);

    pub(super) fn start(
        variant: Variant,
        keys: &Keys,
        wait: Duration,
        hook: &crate::lock::Hook,
    ) -> Self {
        Self {
            deadline: tokio::time::Instant::now() + wait,
            timer: LockTimer::start(variant, keys),
            hook: hook.clone(),
        }
    }

    /// After a failed try: sleeps and returns `true` to try again, or
    /// `false` when the wait is over.
    pub(super) async fn again(&mut self) -> bool {
        if tokio::time::Instant::now() + Self::EVERY > self.deadline {
            self.timer.waited(false);
            return false;
        }
        self.hook.at(crate::lock::WAITS).await;
        tokio::time::sleep(Self::EVERY).await;
        true
    }

    /// The try succeeded: the lock is held from now.
    pub(super) fn acquired(mut self) -> LockTimer {
        self.timer.waited(true);
        self.timer
    }
}
