//! `zookeeper`: the classic ZooKeeper lock recipe, fenced by the zxid.
//!
//! Article 000's table: ZooKeeper is CP (a write is acknowledged once a
//! majority of the ensemble logged it), its lock lives as long as the
//! holder's session, and Curator's lock is reentrant. Here: an ephemeral
//! sequential znode per contender under `/stocklock/locks/{lock key}`, the
//! lowest owns, each waiter watches only its predecessor (no herd). The
//! session timeout is the lease: requests asking for the same `lease_ms`
//! share one session of that timeout per instance. A holder that dies or
//! freezes past it has its session expired by the ensemble and its znode
//! deleted (`kill-instance`, `pause-holder`); the czxid of the owner's znode
//! (the zxid that created it, strictly growing across leader changes) is the
//! fencing token the stock scripts check, so a frozen holder's late write is
//! refused; it is compared only with czxids of the same ensemble (its id in
//! `/stocklock/ensemble`), never with another source's tokens. Not reentrant: the recipe keeps no hold count (Curator's
//! reentrancy is a per-thread counter in the JVM, not in ZooKeeper).

use std::time::{Duration, Instant};

use super::family::{ConsensusWords, consensus_lock};
use super::{About, LockTimer, Protection, Variant, after_release, not_acquired};
use crate::lock::Error as ZooKeeperLockError;
use crate::lock::zookeeper::lock_name;
use crate::section::{Answer, BusyReason, Ctx, Fence, Outcome};
use crate::store::StoreError;

pub(super) const ABOUT: About = About {
    name: "zookeeper",
    protection: "ephemeral sequential znode, lowest owns, waiters watch their predecessor, session as lease; the czxid fences the stock",
    explanation: "The classic ZooKeeper recipe (Curator's InterProcessMutex) on a ZooKeeper server or ensemble (stocklock \
        up --zookeeper 1, or 3; the stock stays on Redis). Each contender creates an ephemeral sequential znode under \
        /stocklock/locks/LOCK; the lowest sequence number owns the lock and every other contender watches only the \
        znode just before its own, so a release wakes one waiter, not a herd. The znode lives as long as its owner's \
        session: the session timeout is the lease (requests with the same lease_ms share one session per instance, kept \
        alive by the client's pings while the process runs). A killed holder's session expires and its znode goes \
        (kill-instance); a write is acknowledged once a majority of the ensemble logged it, so a server's death loses \
        no lock (failover). The owner znode's czxid, the zxid of the transaction that created it, is a fencing token \
        from ZooKeeper's own log: the stock is read and written only by scripts that refuse an older one, so a holder \
        frozen past its session is refused when it wakes (pause-holder). Not reentrant: the recipe keeps no hold count; \
        Curator's reentrancy is a per-thread counter inside the JVM, not in ZooKeeper.",
    protection_zh: "临时顺序节点,序号最小者持有,等待者只监听前一个节点,会话即租约;`czxid` 作为 fencing token 保护库存",
    explanation_zh: "经典的 ZooKeeper 锁方案(Curator 的 `InterProcessMutex`),跑在一台 ZooKeeper 或一个集群上(`stocklock up --zookeeper 1` 或 `3`;库存仍在 Redis)。每个竞争者在 /stocklock/locks/LOCK 下创建一个临时顺序节点;序号最小的持有锁,其他竞争者只监听排在自己前面的节点,一次释放只唤醒一个等待者,没有羊群效应。节点的生命与持有者的会话相同:会话超时就是租期(相同 lease_ms 的请求在每个实例上共用一个会话,进程运行期间由客户端心跳保持)。被杀死的持有者会话过期,节点随之删除(kill-instance);写入在集群多数派记录后才确认,一台服务器挂掉不会丢锁(failover)。持有节点的 `czxid`(创建它的事务的 `zxid`)是来自 ZooKeeper 日志的 fencing token:库存只能由拒绝更旧 token 的脚本读写,停顿超过会话超时的持有者醒来后会被拒绝(pause-holder)。不可重入:这个方案不记录重入次数;Curator 的可重入是 JVM 内按线程计数,不在 ZooKeeper 里。",
    code: r#"
let session = sessions.session(lease).await            // the session timeout is the lease
let me = CREATE /stocklock/locks/{lock}/OWNER-lock- EPHEMERAL_SEQUENTIAL
loop { let queue = GET_CHILDREN sorted by sequence
       if queue[0] == me { break }                      // lowest owns
       GET_DATA(predecessor, watch = true).await }      // one waiter woken per release
critical_section(fence = czxid(me),                     // fenced read and write
                 still_held = session is connected).await
DELETE me"#,
    default_lease: None,
    default_wait: Some(Duration::from_secs(10)),
    claims: consensus_lock(ConsensusWords {
        kept_alive: "session kept alive",
        frees_after: "after the session",
        stale_refused: "stale zxid refused",
        lives_on: "the lock lives on ZooKeeper",
        failover: "the lock outlives a server",
    }),
    undersells: None,
    facts: super::Facts {
        needs: Some(super::Needs::ZooKeeper),
        ..super::family::LOCK_FACTS
    },
};

pub(super) struct ZooKeeperVariant;

impl Protection for ZooKeeperVariant {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        let Some(sessions) = ctx.stores.zookeeper.clone() else {
            return Err(super::unconfigured("zookeeper", "--zookeeper"));
        };
        let lease = ctx.lease(&ABOUT);
        let wait = ctx.wait(&ABOUT);
        let mut timer = LockTimer::start(Variant::ZooKeeper, ctx.keys);
        let session = match sessions.session_within(lease, wait).await {
            Ok(session) => session,
            Err(err) => return refused(err),
        };
        // Whose czxids the fence counts (read once per session).
        let ensemble = match session.ensemble_id().await {
            Ok(ensemble) => ensemble,
            Err(err) => return refused(err),
        };
        let lock = match session.lock(&lock_name(&ctx.keys.lock)) {
            Ok(lock) => lock.with_hook(ctx.hook.clone()),
            Err(err) => return Err(super::lock_store_error("zookeeper", &err)),
        };
        let hold = match lock.lock(wait).await {
            Ok(Some(hold)) => hold,
            Ok(None) => {
                timer.waited(false);
                return not_acquired(wait);
            }
            Err(err) => {
                timer.waited(false);
                return refused(err);
            }
        };
        timer.waited(true);
        let held_since = Instant::now();
        let fence = Fence {
            source: Variant::ZooKeeper.name(),
            store: &ensemble,
            token: hold.token,
        };
        let answer = super::fenced_section(ctx, fence, || !session.may_be_lost()).await;
        let held_for = held_since.elapsed();
        let unlocked = lock.unlock(&hold).await;
        timer.released();
        // `false`: the znode was gone, the session having expired under us.
        let lost = matches!(unlocked, Ok(false)) || session.has_ended();
        // The client's pings keep the session up; they cannot be counted
        // here, but a hold that outlived the session timeout and still found
        // its znode at the release was kept alive that many times.
        let renewals = match unlocked {
            Ok(true) => outlived(held_for, session.session_timeout()),
            _ => 0,
        };
        let counted = super::count_tenure(ctx, Variant::ZooKeeper, renewals, lost).await;
        let answer = after_release(answer, unlocked, "zookeeper: release");
        after_release(answer, counted, "zookeeper: counting a lost lock")
    }
}

/// How many whole session timeouts a hold of `held` outlived.
fn outlived(held: Duration, timeout: Duration) -> u64 {
    if timeout.is_zero() {
        return 0;
    }
    (held.as_millis() / timeout.as_millis()) as u64
}

/// The answer when ZooKeeper did not give the lock: busy `no_quorum` when no
/// server could serve (down, an election, a session that ended), 503 for
/// anything else.
fn refused(err: ZooKeeperLockError) -> Result<Answer, StoreError> {
    match err {
        ZooKeeperLockError::ZooKeeperTimeout(_)
        | ZooKeeperLockError::ZooKeeper(
            zookeeper_client::Error::ConnectionLoss
            | zookeeper_client::Error::NoHosts
            | zookeeper_client::Error::SessionExpired
            | zookeeper_client::Error::ClientClosed
            | zookeeper_client::Error::Timeout,
        ) => {
            tracing::warn!(%err, "zookeeper cannot serve");
            Ok(Answer::unrecorded(Outcome::Busy(BusyReason::NoQuorum)))
        }
        err => Err(super::lock_store_error("zookeeper", &err)),
    }
}
