//! `watchdog`: a reentrant owner lock whose lease is renewed while held.
//!
//! Redisson's `RLock` (articles 000 and 001): a hash of owner → hold count,
//! a 30 s lease renewed every 10 s by a watchdog task, waiters woken by
//! pub/sub when the lock is released. Slow business is safe: the lease is
//! renewed for as long as the work runs. A dead process stops renewing, and
//! its lock frees itself after one lease. What breaks it is a stop-the-world
//! pause longer than the lease: the watchdog freezes with its process, the
//! lease runs out, another owner takes the lock, and the paused one wakes up
//! and writes before it can learn the lock is gone (`pause-holder`). A lock
//! that vanishes is noticed only at the next renewal: deleted after the last
//! renewal before the write, nobody notices, and the next owner and this
//! one both write (`lock-vanishes`; deleted earlier, `lock-vanishes-early`,
//! the renewal notices). The watchdog narrows that window; only a fence the
//! store checks closes it (`fenced`).

use std::time::{Duration, Instant};

use super::family::LEASE_LOCK;
use super::{About, Claim, Claims, LockTimer, Protection, Variant, after_release, not_acquired};
use crate::chaos::mutant::{self, Mutant};
use crate::lock::{OwnerId, ReentrantLock, Tenure, Unlocked, Watchdog};
use crate::section::{Answer, Ctx, Fence, Guard, critical_section};
use crate::store::StoreError;

pub(super) const ABOUT: About = About {
    name: "watchdog",
    protection: "reentrant owner lock (hash), lease renewed every lease/3 by a watchdog, waiters woken by pub/sub",
    explanation: "Redisson's lock. The lock is a hash of owner to hold count, so the same owner can take it again; a \
        watchdog task renews the lease every lease/3 for as long as the owner holds it, and a release publishes a message \
        that wakes one waiter instead of everyone polling. Slow business is safe: the lease never runs out under a live \
        owner, and a dead owner's lock frees itself after one lease. If a renewal is refused, the owner learns it before \
        writing and backs off (`busy`, `lock_lost`), but only a renewal can tell it: a lock deleted after the last renewal \
        before the write goes unnoticed, and two owners write (lock-vanishes; deleted earlier, the renewal notices: \
        lock-vanishes-early). A stop-the-world pause longer than the lease breaks it too: the watchdog freezes with its \
        process, another owner takes the lock, and the paused one wakes and writes (pause-holder).",
    protection_zh: "可重入的持有者锁(`hash`),看门狗每 lease/3 续期,等待者由 pub/sub 唤醒",
    explanation_zh: "Redisson 的锁。锁是一个 `hash`:持有者 → 重入次数,同一持有者可以再次加锁;看门狗任务在持有期间每 lease/3 续期一次;释放时发布消息,唤醒一个等待者,而不是所有人轮询。业务再慢也安全:活着的持有者的租期不会到期,而死掉的持有者的锁在一个租期后自动释放。若续期被拒绝,持有者在写入前就会知道并退出(`busy`, `lock_lost`),但只有续期能告诉它:在写入前最后一次续期之后被删除的锁不会被察觉,两个持有者都会写入(lock-vanishes;删得更早时续期会察觉:lock-vanishes-early)。破坏它的是比租期更长的全进程停顿:看门狗随进程一起冻结,别人拿到锁,停顿结束的持有者醒来后照样写入(pause-holder)。",
    code: r#"
lock.lock(owner, lease = 30s, wait = 10s).await   // HINCRBY lock:{sku} owner 1
let dog = Watchdog::start(lock, owner, lease)    // PEXPIRE every lease/3
critical_section(still_held = !dog.is_lost()).await
dog.stop(); lock.unlock(owner).await            // last hold: DEL + PUBLISH"#,
    default_lease: None,
    default_wait: Some(Duration::from_secs(10)),
    claims: Claims {
        slow_business: Claim::safe("renewed"),
        lock_vanishes_early: Claim::safe("the renewal notices; the holder backs off"),
        lock_vanishes: Claim::oversells(
            "deleted after the last renewal: nothing notices before the write",
        ),
        clock_skew: Claim::safe("Redis keeps the time"),
        redis_restart: Claim::recovers(""),
        ..LEASE_LOCK
    },
    undersells: None,
    facts: super::family::LOCK_FACTS,
};

pub(super) struct WatchdogLock;

impl Protection for WatchdogLock {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        renewed_lock(ctx, Variant::Watchdog, &ABOUT, false).await
    }
}

/// The watchdog lock around the critical section, counted on only until
/// its local deadline; with `fenced`, a fencing token issued by the acquire
/// script itself (`INCR fence:{sku}` in the same atomic step as the grant),
/// which the store must admit for the stock's read and write.
pub(super) async fn renewed_lock(
    ctx: &mut Ctx<'_>,
    variant: Variant,
    about: &About,
    fenced: bool,
) -> Result<Answer, StoreError> {
    let keys = ctx.keys;
    let lease = ctx.lease(about);
    let wait = ctx.wait(about);
    let mut lock = ReentrantLock::new(ctx.conn.clone(), keys.lock.clone(), ctx.wakeups.clone())
        .with_hook(ctx.hook.clone());
    if fenced {
        lock = lock.fenced(keys.fence.clone());
    }
    let owner = OwnerId::new(ctx.instance);
    let mut timer = LockTimer::start(variant, keys);
    let granted = match lock.lock(&owner, lease, wait).await {
        Ok(granted) => granted,
        Err(err) => {
            // The acquire may have happened though its answer was lost:
            // release as this owner, now or as soon as Redis answers.
            let _ = lock.unlock_all_surely(&owner, Instant::now() + lease).await;
            return Err(err.into());
        }
    };
    timer.waited(granted.is_some());
    let Some(grant) = granted else {
        return not_acquired(wait);
    };
    let held = async { Ok(lock.holds(&owner).await? > 0) };
    match super::replicated(ctx, held).await {
        Ok(true) => {}
        not => {
            let _ = lock.unlock_all_surely(&owner, Instant::now() + lease).await;
            timer.released();
            return not.and_then(|_| super::not_replicated());
        }
    }
    let token = grant.token;
    let holder = match grant.token {
        Some(token) => format!("{owner}#{token}"),
        None => owner.to_string(),
    };
    let dog = Watchdog::for_grant_at(lock.clone(), owner.clone(), &grant, ctx.hook.clone());
    let tenure = dog.tenure().clone();
    let guard = Guard {
        holder: Some(&holder),
        fence: token.map(|token| Fence {
            source: variant.name(),
            store: "",
            token,
        }),
        // A live mutant (debug builds only) writes whatever the watchdog found.
        still_held: || mutant::on(Mutant::NoLostCheck) || !tenure.is_lost(),
        lease: Some(lease),
    };
    let answer = critical_section(ctx, guard).await;
    dog.stop();
    let answer = answer.map(|a| a.renewed_at(&tenure.renewed_at()));
    let unlocked = lock.unlock_all_surely(&owner, Instant::now() + lease).await;
    timer.released();
    let released_as_owner = !matches!(unlocked, Ok(Unlocked::NotOwner));
    let counted = record_tenure(ctx, variant, &tenure, released_as_owner).await;
    let answer = after_release(answer, unlocked, "watchdog: unlock");
    after_release(answer, counted, "watchdog: counting renewals")
}

/// After a renewed lock was released: counts the watchdog's renewals and,
/// when the lease was lost while held or the release found the lock no
/// longer ours (`released_as_owner` false), a lost lock.
pub(super) async fn record_tenure(
    ctx: &mut Ctx<'_>,
    variant: Variant,
    tenure: &Tenure,
    released_as_owner: bool,
) -> Result<(), StoreError> {
    let lost = tenure.is_lost() || !released_as_owner;
    super::count_tenure(ctx, variant, tenure.renewals(), lost).await
}
