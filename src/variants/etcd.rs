//! `etcd`: etcd's own lock, fenced by the store's own revision.
//!
//! Article 000's table puts etcd on the CP side: every write is agreed by a
//! majority of the members through Raft before it is acknowledged. The lock
//! is etcd's `concurrency.Mutex` idiom: a lease with keep-alives (the lease
//! knob, whole seconds), the contender's key put in a transaction only if
//! it does not exist yet (`create_revision == 0`), the owner the key with
//! the lowest `create_revision`, every waiter watching only its predecessor
//! (no herd). The owner key's `create_revision` is the fencing token: the
//! position of its transaction in the cluster's log, larger for every later
//! holder. The stock is read and written through the `fenced` scripts,
//! which refuse a revision older than the newest they have seen from the
//! same cluster (its id comes with every answer).
//!
//! A dead holder's keep-alives stop and etcd deletes its key when the lease
//! runs out (`kill-instance`); a dead member, the leader included, loses no
//! lock (`failover`); a holder frozen past its lease is refused by the
//! fence (`pause-holder`). Not reentrant, as etcd's Mutex.

use std::time::Duration;

use super::family::{ConsensusWords, consensus_lock};
use super::{About, LockTimer, Protection, Variant, after_release, not_acquired};

use crate::lock::Error as LockError;
use crate::lock::etcd::{EtcdLock, Session};
use crate::section::{Answer, BusyReason, Ctx, Fence, Outcome};
use crate::store::StoreError;

pub(super) const ABOUT: About = About {
    name: "etcd",
    protection: "etcd lease + keep-alive, key queued by create_revision, waiters watch their predecessor; the revision fences the stock",
    explanation: "etcd's own lock, on a three-member etcd cluster (`stocklock up --etcd 3`; the stock stays on Redis). Each \
        request takes an etcd lease of the lease knob (whole seconds, kept alive every third of it) and puts its key \
        lock/{sku}/LEASE in a transaction that only succeeds if the key does not exist yet. The key with the lowest \
        create_revision owns the lock; every other contender watches only the key just before its own, so a release \
        wakes one waiter, not a herd. Every write is agreed by a majority of the members before it is acknowledged: \
        the death of a member, even the leader, loses no lock (failover), which is what Redis with a replica cannot \
        promise. A dead holder's keep-alives stop and etcd deletes its key when the lease runs out (kill-instance). \
        The owner key's create_revision is a fencing token from etcd's own log: the stock is read and written only by \
        scripts that refuse a revision older than the newest they have seen, so a holder frozen past its lease is \
        refused when it wakes (pause-holder). Not reentrant: a second lock by the same lease finds its own key.",
    protection_zh: "etcd 租约 + 续约,按 `create_revision` 排队,等待者只监听前一个;`revision` 作为 fencing token 保护库存",
    explanation_zh: "etcd 自己的锁,跑在三个成员的 etcd 集群上(`stocklock up --etcd 3`;库存仍在 Redis)。每个请求申请一个租约(租期旋钮,按整秒,每三分之一租期续约一次),在事务里写入自己的键 `lock/{sku}/LEASE`,只有键不存在时才写入。create_revision 最小的键持有锁;其他竞争者只监听排在自己前面的那个键,所以一次释放只唤醒一个等待者,没有羊群效应。每次写入都要多数成员同意后才确认:一个成员挂掉,哪怕是领导者,也不会丢锁(failover),这是带副本的 Redis 做不到的。持有者死掉后续约停止,租约到期时 etcd 删除它的键(kill-instance)。持有键的 create_revision 是来自 etcd 日志的 fencing token:库存只能由拒绝旧 `revision` 的脚本读写,停顿超过租期的持有者醒来后会被拒绝(pause-holder)。不可重入:同一租约再次加锁会找到自己的键。",
    code: r#"
let session = Session::grant(etcd, lease).await       // lease + keep-alive every lease/3
TXN if create_revision(lock/{sku}/LEASE) == 0
    then PUT lock/{sku}/LEASE lease=<lease> else GET  // queue once
let owner = RANGE lock/{sku}/ sort by CREATE limit 1
if owner != me { WATCH delete of my predecessor }     // one waiter woken per release
critical_section(fence = my create_revision,          // fenced read and write
                 still_held = !session.is_lost()).await
DELETE lock/{sku}/LEASE; LEASE REVOKE <lease>"#,
    default_lease: None,
    default_wait: Some(Duration::from_secs(10)),
    claims: consensus_lock(ConsensusWords {
        kept_alive: "lease kept alive",
        frees_after: "after the lease",
        stale_refused: "stale revision refused",
        lives_on: "the lock lives on etcd",
        failover: "the lock outlives the leader",
    }),
    undersells: None,
    facts: super::Facts {
        needs: Some(super::Needs::Etcd),
        ..super::family::LOCK_FACTS
    },
};

pub(super) struct EtcdVariant;

impl Protection for EtcdVariant {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        let Some(client) = ctx.stores.etcd.clone() else {
            return Err(super::unconfigured("etcd", "--etcd-endpoints"));
        };
        let lease = ctx.lease(&ABOUT);
        let wait = ctx.wait(&ABOUT);
        let mut timer = LockTimer::start(Variant::Etcd, ctx.keys);
        let session = match Session::grant(&client, lease).await {
            Ok(session) => session,
            Err(err) => return refused(err),
        };
        ctx.hook.at(crate::gate::points::AFTER_GRANT).await;
        let lock = EtcdLock::new(client, &ctx.keys.lock).with_hook(ctx.hook.clone());
        let held = match lock.lock(&session, wait).await {
            Ok(held) => held,
            Err(err) => {
                timer.waited(false);
                // Its key, if any, goes with the lease.
                if let Err(revoke) = session.revoke().await {
                    tracing::debug!(%revoke, "etcd: revoking an unused lease");
                }
                return match err {
                    LockError::Busy => not_acquired(wait),
                    err => refused(err),
                };
            }
        };
        timer.waited(true);
        let fence = Fence {
            source: Variant::Etcd.name(),
            store: &held.cluster,
            token: held.token,
        };
        let answer = super::fenced_section(ctx, fence, || !session.is_lost()).await;
        let lost = session.is_lost();
        let renewals = session.renewals();
        let released = lock.release(&held, session).await;
        timer.released();
        let counted = super::count_tenure(ctx, Variant::Etcd, renewals, lost).await;
        let answer = after_release(answer, released, "etcd: release");
        after_release(answer, counted, "etcd: counting a lost lock")
    }
}

/// The answer when etcd did not give the lock: busy `no_quorum` when the
/// cluster cannot serve (a majority of members down, an election), busy
/// `lock_lost` when the lease ended while waiting, 503 for anything else.
fn refused(err: LockError) -> Result<Answer, StoreError> {
    match err {
        LockError::Busy => Ok(Answer::unrecorded(Outcome::Busy(BusyReason::WaitTimedOut))),
        LockError::SessionLost => Ok(Answer::unrecorded(Outcome::Busy(BusyReason::LockLost))),
        LockError::EtcdUnavailable(why) => {
            tracing::warn!(%why, "etcd cannot serve");
            Ok(Answer::unrecorded(Outcome::Busy(BusyReason::NoQuorum)))
        }
        err => Err(super::lock_store_error("etcd", &err)),
    }
}
