//! `fenced`: the watchdog lock plus a fencing token (Kleppmann).
//!
//! Every acquisition takes a number from `INCR fence:{sku}`, always larger
//! than the last, inside the acquire script itself (no holder can stall
//! between its lock and its token). The stock is read and written only through scripts that
//! refuse a token older than the newest one they have seen. A holder that
//! froze past its lease (a GC pause, SIGSTOP) and woke up after a newer
//! holder came is refused by the store itself: its belief that it holds the
//! lock no longer matters. `pause-holder` shows it: the same pause that makes
//! `watchdog` oversell leaves `fenced` at zero, with the refusals counted.
//! So does `lock-vanishes`: a lock deleted after the last renewal before
//! the write goes unnoticed by the watchdog, and there it is the fence, not
//! the renewal, that refuses the old holder's write.

use std::time::Duration;

use super::family::LEASE_LOCK;
use super::watchdog::renewed_lock;
use super::{About, Claim, Claims, Protection, Variant};
use crate::chaos::mutant::{self, Mutant};
use crate::section::{Answer, Ctx};
use crate::store::StoreError;

pub(super) const ABOUT: About = About {
    name: "fenced",
    protection: "watchdog lock + fencing token (INCR inside the acquire script); stock read and written by scripts that refuse stale tokens",
    explanation: "The watchdog lock, plus a fencing token: every acquisition takes a number from INCR fence:{sku}, always larger \
        than the last, in the same script that grants the lock, and the stock is read and written only through Lua scripts that refuse a token older than the newest \
        one they have seen. Both the read and the write are fenced: fencing only the write would still let two holders read \
        the same stock. A holder that froze longer than its lease (a GC pause, a SIGSTOP) and woke after a newer holder came \
        is refused by the store itself, whatever it believes (`busy`, `stale_token`; counted as fenced_rejections). The \
        pause-holder scenario shows it: the pause that makes watchdog oversell leaves fenced at zero. So does \
        lock-vanishes: a lock deleted after the last renewal before the write goes unnoticed, and the fence, not the \
        renewal, refuses the old holder's write.",
    protection_zh: "看门狗锁 + fencing token(在加锁脚本内 INCR);库存的读和写都由拒绝过期 token 的脚本完成",
    explanation_zh: "在看门狗锁之上加 fencing token:每次加锁都在授予锁的同一个脚本里从 `INCR fence:{sku}` 取一个比上次更大的号码,库存的读和写都只能通过 Lua 脚本进行,脚本拒绝比已见过的最新号码更旧的 token。读和写都要校验:只校验写,两个持有者仍可能读到同一个库存。一个停顿超过租期(GC 停顿、SIGSTOP)、醒来时已有更新持有者的旧持有者,会被存储本身拒绝,不管它自己怎么认为(`busy`, `stale_token`;计入 fenced_rejections)。pause-holder 场景可以看到:同样的停顿让 watchdog 超卖,而 fenced 仍为零。lock-vanishes 也一样:在写入前最后一次续期之后删除的锁不会被察觉,这时拒绝旧持有者写入的是 fencing token,而不是续期。",
    code: r#"
let token = lock.lock(owner, lease, wait).await // the acquire script: grant
                                                 // and INCR fence:{sku}: 41, 42, ...
let dog = Watchdog::start(..)
EVAL "if token < seen then return nil end       -- stale: refused
      seen = token; return GET stock" ...
sleep(work_ms)                                   // a pause here is harmless now
EVAL "if token < seen then return nil end; SET stock v; record" ..."#,
    default_lease: None,
    default_wait: Some(Duration::from_secs(10)),
    claims: Claims {
        slow_business: Claim::safe("renewed"),
        pause_holder: Claim::safe("stale token refused"),
        lock_vanishes_early: Claim::safe("the renewal notices first; the holder backs off"),
        lock_vanishes: Claim::safe("the store refuses the stale token"),
        redlock_restart_without_persistence: Claim::safe("stale token refused"),
        failover: Claim::oversells("the fence counter failed over with the lock"),
        ..LEASE_LOCK
    },
    undersells: None,
    facts: super::family::LOCK_FACTS,
};

pub(super) struct FencedLock;

impl Protection for FencedLock {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        // A live mutant (debug builds only) runs it with no fence at all.
        let fenced = !mutant::on(Mutant::NoFence);
        renewed_lock(ctx, Variant::Fenced, &ABOUT, fenced).await
    }
}
