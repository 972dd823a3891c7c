//! `token`: `SET lock <owner token> NX PX lease`, released by compare-and-delete.
//!
//! The right way of articles 001 and 002: the lock and its expiry are set by
//! one command, so no crash leaves it forever; the value is a token unique to
//! the request, and the release is a Lua script that deletes only its own
//! lock. What breaks it is time: when `work_ms` outlives `lease_ms`, the lease
//! runs out while the business still works, a second request takes the lock,
//! and both write (`slow-business` oversells). A long pause does the same.

use std::time::{Duration, Instant};

use super::family::LEASE_LOCK;
use super::{
    About, Claim, Claims, LockTimer, Protection, Reason, Variant, after_release, not_acquired,
};
use crate::chaos::mutant::{self, Mutant};
use crate::lock::{LeaseLock, OwnerId};
use crate::section::{Answer, Ctx, Guard, critical_section};
use crate::store::StoreError;

pub(super) const ABOUT: About = About {
    name: "token",
    protection: "SET lock <token> NX PX lease; Lua compare-and-delete release",
    explanation: "Sets the lock and its lease in one command, SET NX PX, with a random token as the value, and releases it \
        with a Lua script that deletes the key only if it still holds that token. No crash can leave it without a TTL, \
        and nobody can free someone else's lock. It fails fast by default (wait_ms=0), as in the articles, and waits for a \
        release (woken by pub/sub) when wait_ms is given. What breaks it is time: when work_ms outlives lease_ms, the lease \
        runs out in the middle of the business, a second request takes the lock, and both write (slow-business oversells).",
    protection_zh: "`SET lock <token> NX PX` 租期;用 Lua 比较并删除来释放",
    explanation_zh: "用一条 SET NX PX 同时加锁并设置租期,值是随机 token;释放时用 Lua 脚本,只有 token 仍是自己的才删除。任何崩溃都不会留下没有过期时间的锁,也没人能删掉别人的锁。默认快速失败(wait_ms=0),与文章一致;给出 wait_ms 时会等待释放(由 pub/sub 唤醒)。破坏它的是时间:work_ms 超过 lease_ms 时,业务还没做完租期就到了,第二个请求拿到锁,两者都写入(slow-business 超卖)。",
    code: r#"
let token = uuid()
if SET lock:{sku} token NX PX lease == nil { return busy }
critical_section().await          // must finish within the lease!
EVAL "if GET(KEYS[1]) == ARGV[1] then DEL(KEYS[1]) end" lock:{sku} token"#,
    default_lease: None,
    default_wait: Some(Duration::ZERO),
    claims: Claims {
        clock_skew: Claim::safe("Redis keeps the time"),
        redis_restart: Claim::recovers(""),
        failover_wait_early: Claim::safe("WAIT saw no replica: released"),
        failover_wait: Claim::oversells(
            "WAIT covers the lock, not the write the failover rolls back",
        ),
        ..LEASE_LOCK
    },
    undersells: Some(Reason {
        en: "fails fast (wait_ms=0 unless asked to wait): a buyer who finds the lock held is turned away while stock is left",
        zh: "快速失败(除非要求等待,wait_ms=0):买家发现锁被占用就被拒绝,而库存还有剩余",
    }),
    facts: super::family::LOCK_FACTS,
};

pub(super) struct TokenLock;

impl Protection for TokenLock {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        let lease = ctx.lease(&ABOUT);
        let wait = ctx.wait(&ABOUT);
        let lock = LeaseLock::new(ctx.conn.clone(), ctx.keys.lock.clone(), ctx.wakeups.clone())
            .with_hook(ctx.hook.clone());
        let owner = OwnerId::new(ctx.instance);
        let mut timer = LockTimer::start(Variant::Token, ctx.keys);
        let granted = match lock.lock(&owner, lease, wait).await {
            Ok(granted) => granted,
            Err(err) => {
                // The acquire may have happened though its answer was lost:
                // release by our token, now or as soon as Redis answers.
                let _ = lock.unlock_surely(&owner, Instant::now() + lease).await;
                return Err(err.into());
            }
        };
        timer.waited(granted.is_some());
        if granted.is_none() {
            return not_acquired(wait);
        }
        if mutant::on(Mutant::NoLease) {
            // A live mutant (debug builds only): the lock keeps no lease.
            let _: bool = redis::AsyncCommands::persist(&mut ctx.conn, &ctx.keys.lock).await?;
        }
        match super::replicated(ctx, lock.holds(&owner)).await {
            Ok(true) => {}
            not => {
                let _ = lock.unlock_surely(&owner, Instant::now() + lease).await;
                timer.released();
                return not.and_then(|_| super::not_replicated());
            }
        }
        // No local deadline on purpose: this is the articles' SET NX PX lock,
        // and what the lab shows with it is the lease running out under slow
        // business. `LeaseLock::lock` hands its users the deadline to check.
        let guard = Guard {
            holder: Some(owner.as_str()),
            fence: None,
            still_held: || true,
            lease: Some(lease),
        };
        let answer = critical_section(ctx, guard).await;
        let released = match mutant::on(Mutant::PlainDel) {
            // A live mutant (debug builds only): whoever holds it.
            true => plain_del(ctx).await,
            false => lock
                .unlock_surely(&owner, Instant::now() + lease)
                .await
                .map_err(StoreError::from),
        };
        timer.released();
        if let Ok(false) = released {
            tracing::warn!(%owner, "token: the lease ran out before the release; another holder may have overlapped");
        }
        after_release(answer, released, "token: unlock")
    }
}

/// The live mutant's release: `DEL`, whoever holds the lock.
async fn plain_del(ctx: &mut Ctx<'_>) -> Result<bool, StoreError> {
    let deleted: i64 = redis::AsyncCommands::del(&mut ctx.conn, &ctx.keys.lock).await?;
    Ok(deleted == 1)
}
