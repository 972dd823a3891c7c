//! `redlock`: the token lock taken on a majority of N independent Redis servers.
//!
//! Article 000's Redlock. The lock lives on the `--redlock-nodes` (five under
//! `up`), the stock stays on the main Redis. `SET NX PX` goes to every node at
//! once; the owner holds the lock when a majority said yes with some lease
//! left (validity = lease − time spent − drift), renews it on every node
//! while it works, as the watchdog does, and releases it on every node.
//! Losing a minority of nodes changes nothing (`redlock-minority-down`);
//! losing a majority stops every sale with `busy, no_quorum` until they come
//! back (`redlock-majority-down`). It is still a timing lock: a pause longer
//! than the lease oversells (`pause-holder`), and a node that restarts
//! without persistence forgets the lock and gives a second owner its
//! majority (`redlock-restart-without-persistence`).

use std::time::Duration;

use super::family::LEASE_LOCK;
use super::watchdog::record_tenure;
use super::{About, Claim, Claims, LockTimer, Protection, Variant, after_release, not_acquired};
use crate::lock::{OwnerId, Refused, Watchdog};
use crate::section::{Answer, BusyReason, Ctx, Guard, Outcome, critical_section};
use crate::store::StoreError;

pub(super) const ABOUT: About = About {
    name: "redlock",
    protection: "SET NX PX on a majority of N independent Redis servers, validity = lease − elapsed − drift, renewed while held",
    explanation: "Redlock, from article 000. The lock is not on the main Redis but on N independent Redis servers (five under \
        stocklock up; the stock stays on the main Redis). SET lock token NX PX lease goes to every node at once, each with a \
        100 ms timeout; the owner holds the lock when a majority said yes and some of the lease is left once the time spent \
        and a clock drift are taken off (the validity). Otherwise it releases what it got on every node and retries: woken by the holder's release when a majority named one, \
        after a random delay when the votes split. While the business works the lease is renewed on every node, as the watchdog does, and the release \
        goes to every node. Two dead nodes of five change nothing (redlock-minority-down); three stop every sale with busy, \
        no_quorum until they return (redlock-majority-down). It is still a timing lock: a pause longer than the lease \
        oversells (pause-holder), and a node that restarts without persistence forgets the lock it granted, so a second \
        owner finds its majority while the first still works (redlock-restart-without-persistence).",
    protection_zh: "在 N 个独立 Redis 的多数派上 SET NX PX,有效期 = 租期 − 加锁耗时 − 时钟漂移,持有期间续期",
    explanation_zh: "文章 000 的 Redlock。锁不在主 Redis 上,而在 N 个相互独立的 Redis 上(`stocklock up` 默认启动五个;库存仍在主 Redis)。`SET lock token NX PX` 租期同时发往每个节点,每个节点超时 100 ms;多数节点同意,并且扣掉加锁耗时和时钟漂移后租期还有剩余(有效期),才算拿到锁。否则在所有节点上释放已拿到的部分,随机等待后重试。业务执行期间像看门狗一样在所有节点上续期,释放也发往所有节点。五个节点挂两个没有影响(redlock-minority-down);挂三个则所有请求 `busy`, `no_quorum`,直到节点恢复(redlock-majority-down)。它仍是依赖时间的锁:比租期更长的停顿会超卖(pause-holder);没有持久化的节点重启后会忘记它发出的锁,第二个持有者因此凑够多数,而第一个还在工作(redlock-restart-without-persistence)。",
    code: r#"
let t0 = now()
let yes = join_all(nodes.map(|n| timeout(100ms, SET lock:{sku} token NX PX lease)))
let validity = lease - (now() - t0) - (lease / 100 + 2ms)
if yes < nodes/2 + 1 || validity <= 0 { unlock_all(); sleep(random(2..20ms)); retry }
let dog = Watchdog::start(redlock, owner, lease)   // extends on every node
critical_section(still_held = !dog.is_lost()).await
unlock_all()                                       // compare-and-delete on every node"#,
    default_lease: None,
    default_wait: Some(Duration::from_secs(10)),
    claims: Claims {
        slow_business: Claim::safe("renewed"),
        lock_vanishes_early: Claim::not_applicable("the lock lives on the Redlock nodes"),
        lock_vanishes: Claim::not_applicable("the lock lives on the Redlock nodes"),
        redlock_minority_down: Claim::keeps_selling(""),
        redlock_majority_down: Claim::busy("no quorum; sells again when the nodes return"),
        redlock_restart_without_persistence: Claim::oversells("a second owner finds a majority"),
        failover: Claim::not_applicable("its nodes are not replicated"),
        ..LEASE_LOCK
    },
    undersells: None,
    facts: super::Facts {
        needs: Some(super::Needs::Redlock),
        ..super::family::LOCK_FACTS
    },
};

pub(super) struct RedlockLock;

impl Protection for RedlockLock {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        let Some(nodes) = ctx.stores.redlock.as_ref() else {
            return Err(StoreError(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "redlock has no nodes",
                "this instance was started without --redlock-nodes (stocklock up --redlock 5 starts five)".to_owned(),
            ))));
        };
        let lease = ctx.lease(&ABOUT);
        let wait = ctx.wait(&ABOUT);
        let lock = nodes
            .lock(ctx.keys.lock.clone())
            .with_wakeups(ctx.conn.clone(), ctx.wakeups.clone())
            .with_hook(ctx.hook.clone());
        let owner = OwnerId::new(ctx.instance);
        let mut timer = LockTimer::start(Variant::Redlock, ctx.keys);
        // (The live mutant tries one round only, then falls back.)
        let fallback = crate::chaos::mutant::on(crate::chaos::mutant::Mutant::QuorumFallback);
        let rounds_for = if fallback { Duration::ZERO } else { wait };
        let acquired = lock.lock(&owner, lease, rounds_for).await?;
        timer.waited(acquired.is_ok());
        let grant = match acquired {
            Ok(grant) => grant,
            Err(Refused::Held) => return not_acquired(wait),
            // A live mutant (debug builds only): a single Redis's lock instead.
            Err(Refused::NoQuorum { .. }) if fallback => {
                return super::token::TokenLock.deduct(ctx).await;
            }
            Err(Refused::NoQuorum { answered, quorum }) => {
                tracing::warn!(answered, quorum, "redlock: too few nodes answered");
                return Ok(Answer::unrecorded(Outcome::Busy(BusyReason::NoQuorum)));
            }
        };
        // Its validity is its deadline: counted from the round's send.
        let dog = Watchdog::for_grant_at(lock.clone(), owner.clone(), &grant, ctx.hook.clone());
        let tenure = dog.tenure().clone();
        let guard = Guard {
            holder: Some(owner.as_str()),
            fence: None,
            still_held: || !tenure.is_lost(),
            lease: Some(lease),
        };
        let answer = critical_section(ctx, guard).await;
        dog.stop();
        let answer = answer.map(|a| a.renewed_at(&tenure.renewed_at()));
        // The stock lives on another server than the lock. A write whose
        // answer never came may still land there (a paused Redis runs it
        // when it wakes, and not necessarily before commands that come on
        // other connections): released now, the lock could let the next
        // holder read the stock first. Unrenewed, its lease frees it instead.
        // (The locks on the stock's own Redis release on the same
        // connection as the write, so Redis runs the release after it.)
        let write_in_doubt = matches!(&answer, Ok(a) if a.outcome == Outcome::Unknown);
        let released_as_owner = if write_in_doubt {
            tracing::warn!(%owner, "redlock: the write's outcome is unknown; the lock is left to its lease");
            true
        } else {
            lock.unlock(&owner).await >= lock.quorum()
        };
        timer.released();
        let counted = record_tenure(ctx, Variant::Redlock, &tenure, released_as_owner).await;
        after_release(answer, counted, "redlock: counting renewals")
    }
}
