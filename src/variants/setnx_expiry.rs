//! `setnx-expiry`: `SETNX lock <expiry time>`, `GETSET` to take over an
//! expired lock, no owner (article 002's second wrong example).
//!
//! The lock's value is the wall-clock time it expires; the key itself has
//! no TTL. A request that finds the lock takes it over when that time has
//! passed, by its own clock, with GETSET (and keeps it only if the old value
//! it swapped out is the one it read). A crash no longer leaves the SKU
//! stuck: the lock counts as free once its time passes. But it trusts every
//! instance's clock: an instance whose clock runs ahead sees a live lock as
//! expired and steals it (`clock-skew`); the losing GETSET still overwrites
//! the expiry time; and the release deletes whatever lock is there. Work
//! longer than the lease oversells as it does for `setnx`.
//!
//! On errors it stays naive on purpose: a failed DEL leaves the lock until
//! its expiry time passes (then the next buyer takes it over); nothing
//! retries a release it cannot make safely (no owner).

use std::time::Duration;

use redis::AsyncCommands;

use super::family::LEASE_LOCK;
use super::{About, Claim, Claims, Protection, Reason, Spin, Variant, after_release, not_acquired};
use crate::section::{Answer, Ctx, critical_section, unguarded};
use crate::store::StoreError;

pub(super) const ABOUT: About = About {
    name: "setnx-expiry",
    protection: "SETNX lock <expiry time>; GETSET to take over an expired lock; no owner, no TTL",
    explanation: "The lock's value is the wall-clock time at which it expires, and the key has no TTL. A request that finds the \
        lock reads that time; if it has passed, by the request's own clock, it takes the lock over with GETSET, and keeps it \
        only if the value it swapped out is the one it read. A crash no longer leaves the SKU stuck: the lock counts as free \
        once its time passes. But every instance's clock must agree: an instance whose clock runs ahead sees a live lock as \
        expired and steals it (clock-skew); a losing GETSET still overwrites the expiry; there is no owner, so the release \
        deletes whatever lock is there; and work longer than the lease oversells as with setnx. A release that fails (a Redis \
        error) leaves the lock until its expiry time passes.",
    protection_zh: "`SETNX lock <过期时间>`;用 GETSET 接管已过期的锁;没有持有者,也没有 TTL",
    explanation_zh: "锁的值是它过期的墙上时间,键本身没有 TTL。请求发现锁存在时读取这个时间;如果按照自己的时钟已经过期,就用 GETSET 接管,并且只有换出来的旧值等于刚才读到的值时才算拿到锁。崩溃不再让 SKU 永远卡住:时间一过锁就算空闲。但它要求所有实例的时钟一致:时钟偏快的实例会把仍然有效的锁当成过期并抢走(clock-skew);失败的 GETSET 仍会改写过期时间;没有持有者,释放时删掉的是当时存在的任何锁;业务时间超过租期时与 setnx 一样会超卖。释放失败(Redis 出错)时,锁一直留到它的过期时间。",
    code: r#"
let expires = now() + lease
if SETNX lock:{sku} expires == 1 { acquired }
else if GET lock:{sku} < now() {                 // by MY clock
    if GETSET lock:{sku} expires == what_I_read { acquired }
}
critical_section().await
DEL lock:{sku}                                    // whoever's lock it is"#,
    default_lease: None,
    default_wait: Some(Duration::ZERO),
    claims: Claims {
        crash_after_acquire: Claim::frees("after expiry"),
        kill_instance: Claim::frees("after expiry"),
        clock_skew: Claim::oversells("steals a live lock"),
        failover: Claim::not_applicable("token shows it"),
        ..LEASE_LOCK
    },
    undersells: Some(Reason {
        en: "fails fast (wait_ms=0): a buyer who finds the lock held is turned away while stock is left",
        zh: "快速失败(wait_ms=0):买家发现锁被占用就被拒绝,而库存还有剩余",
    }),
    facts: super::family::LOCK_FACTS,
};

pub(super) struct SetnxExpiryLock;

impl SetnxExpiryLock {
    /// One try, by this instance's clock: `true` when the lock is ours now.
    async fn try_once(ctx: &mut Ctx<'_>, lease_ms: i64) -> Result<bool, StoreError> {
        let lock = &ctx.keys.lock;
        let now = ctx.chaos.now_ms();
        let expires = now + lease_ms;
        if ctx.conn.set_nx(lock, expires).await? {
            return Ok(true);
        }
        let current: Option<i64> = ctx.conn.get(lock).await?;
        match current {
            // Released between our SETNX and GET: try again next round.
            None => Ok(false),
            Some(current) if current < now => {
                let swapped: Option<i64> = ctx.conn.getset(lock, expires).await?;
                Ok(swapped == Some(current))
            }
            Some(_) => Ok(false),
        }
    }
}

impl Protection for SetnxExpiryLock {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        let keys = ctx.keys;
        let lease = ctx.lease(&ABOUT);
        let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX / 2);
        let wait = ctx.wait(&ABOUT);
        let mut spin = Spin::start(Variant::SetnxExpiry, keys, wait, &ctx.hook);
        while !Self::try_once(ctx, lease_ms).await? {
            if !spin.again().await {
                return not_acquired(wait);
            }
        }
        let timer = spin.acquired();
        let answer = critical_section(ctx, unguarded().leased(lease)).await;
        // No owner: this deletes whatever lock is there by now.
        let released = ctx.conn.del::<_, i64>(&keys.lock).await;
        timer.released();
        after_release(
            answer,
            released.map_err(StoreError::from),
            "setnx-expiry: DEL",
        )
    }
}
