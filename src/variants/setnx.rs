//! `setnx`: `SETNX lock 1`, then a separate `EXPIRE`, and a plain `DEL`.
//!
//! The wrong example of articles 001 and 002, kept faithfully wrong. Mutual
//! exclusion holds while nothing goes wrong. But the two commands are not
//! atomic: a crash between them leaves a lock that never expires, and the SKU
//! can never sell again (`crash-after-acquire`). And the release deletes
//! whatever lock is there: when the work outlives the lease, the lock has
//! expired, a second request holds it, and the first one's `DEL` frees the
//! second's lock for a third (`slow-business`).
//!
//! It stays naive on every error path too, on purpose: a Redis error after
//! SETNX went out (its answer lost, or EXPIRE failing) leaves the same lock
//! with no TTL as the taught crash; a DEL that fails leaves the lock until
//! its lease runs out. Nothing tries to clean up: no owner, no release to
//! retry safely.

use std::time::Duration;

use redis::AsyncCommands;

use super::family::LEASE_LOCK;
use super::{About, Claim, Claims, Protection, Reason, Spin, Variant, after_release, not_acquired};
use crate::lock::wakeups::release_channel;
use crate::section::{Answer, Ctx, critical_section, unguarded};
use crate::store::{Conn, Keys, StoreError};

pub(super) const ABOUT: About = About {
    name: "setnx",
    protection: "SETNX lock 1, then a separate EXPIRE; plain DEL on release",
    explanation: "Takes the lock with SETNX and gives it a lifetime with a second command, EXPIRE; releases with DEL. \
        While nothing goes wrong it excludes other holders, across instances. But SETNX and EXPIRE are two steps: a crash \
        between them leaves a lock with no TTL that nobody will ever delete, and the SKU is stuck for good (crash-after-acquire). \
        And DEL does not check whose lock it deletes: when work_ms outlives the lease, the lock expires, another request takes it, \
        and the first request's DEL frees the second one's lock for a third (slow-business oversells). It is naive on \
        errors too: a Redis error after SETNX went out (its answer lost, or EXPIRE failing) leaves the same TTL-less lock as \
        the crash, and a failed DEL leaves the lock until its lease runs out.",
    protection_zh: "先 `SETNX lock 1`,再单独 `EXPIRE`;释放时直接 DEL",
    explanation_zh: "用 SETNX 加锁,再用第二条命令 EXPIRE 设置过期时间,释放时 DEL。一切正常时它能跨实例互斥。但 SETNX 和 EXPIRE 是两步:两者之间进程崩溃,就会留下一把没有过期时间、永远没人删除的锁,这个 SKU 从此卖不出去(crash-after-acquire)。而且 DEL 不检查锁是谁的:当 work_ms 超过租期,锁已过期并被别的请求拿到,第一个请求的 DEL 会把别人的锁删掉,让第三个请求进来(slow-business 超卖)。出错时它同样天真:SETNX 发出后 Redis 出错(应答丢失,或 EXPIRE 失败)会留下和崩溃一样没有 TTL 的锁;DEL 失败则锁一直留到租期结束。",
    code: r#"
if SETNX lock:{sku} 1 == 0 { return busy }
                              // a crash here: lock without TTL, forever
EXPIRE lock:{sku} lease
critical_section().await
DEL lock:{sku}                // whoever's lock it is by now"#,
    default_lease: None,
    default_wait: Some(Duration::ZERO),
    claims: Claims {
        slow_business: Claim::oversells("frees others' locks"),
        crash_after_acquire: Claim::deadlock("lock never expires"),
        kill_instance: Claim::frees("after lease: the EXPIRE was set"),
        failover: Claim::not_applicable("token shows it"),
        ..LEASE_LOCK
    },
    undersells: Some(Reason {
        en: "fails fast (wait_ms=0): a buyer who finds the lock held is turned away while stock is left",
        zh: "快速失败(wait_ms=0):买家发现锁被占用就被拒绝,而库存还有剩余",
    }),
    facts: super::family::LOCK_FACTS,
};

pub(super) struct SetnxLock;

impl Protection for SetnxLock {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        let keys = ctx.keys;
        let lease = ctx.lease(&ABOUT);
        let wait = ctx.wait(&ABOUT);
        let mut spin = Spin::start(Variant::Setnx, keys, wait, &ctx.hook);
        while !ctx.conn.set_nx::<_, _, bool>(&keys.lock, 1).await? {
            if !spin.again().await {
                return not_acquired(wait);
            }
        }
        let timer = spin.acquired();
        // The gap the articles warn about: a crash here leaves a lock no one expires.
        ctx.chaos
            .crash_if_armed_after_acquire(&mut ctx.conn, keys)
            .await?;
        ctx.hook.at(crate::gate::points::AFTER_SETNX).await;
        let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
        let _: bool = ctx.conn.pexpire(&keys.lock, lease_ms).await?;

        let answer = critical_section(ctx, unguarded().leased(lease)).await;

        let released = release(&mut ctx.conn, keys).await;
        timer.released();
        after_release(answer, released, "setnx: DEL")
    }
}

/// The wrong release: no owner check. Then tell lock waiters of other
/// variants on this SKU; harmless otherwise.
async fn release(conn: &mut Conn, keys: &Keys) -> Result<(), StoreError> {
    let _: i64 = conn.del(&keys.lock).await?;
    let _: i64 = conn
        .publish(release_channel(&keys.lock), &keys.lock)
        .await?;
    Ok(())
}
