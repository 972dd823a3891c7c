//! The judge of a holder that died inside its section, and of the buyer
//! after it (`kill-instance`, `crash-after-acquire`); and of a buyer
//! killed between two stores (`kill-instance` for `redis-then-pg`).

use std::time::Duration;

use super::{Judgement, Observed, Reply, said_of};
use crate::pgstock::both::BothBooks;
use crate::said;
use crate::variants::Behaviour;
use crate::wire::{LockState, Said};

/// A holder that died inside its section, and the buyer after it
/// (`kill-instance`, `crash-after-acquire`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// How and where the holder died: "instance a (pid 12) killed with SIGKILL".
    pub death: Said,
    /// How we know it held the lock when it died (announced from inside its
    /// section; or, for a crash before its section, its lock left with no
    /// TTL); `None`: no proof.
    pub held: Option<Said>,
    /// The pid `up` restarted it as: proof the process really died.
    pub restarted: Option<u32>,
    /// The next buyer, on the other instance, waiting up to `window`.
    pub next: Reply,
    /// Lease + 1 s: any lock with that lease frees itself by then.
    pub window: Duration,
    /// The lock after the window.
    pub lock: LockState,
}

impl Recovery {
    /// How a holder is known to have held its lock when it died: it
    /// announced it was inside its section.
    pub fn announced() -> Said {
        said!(
            "announced from inside its section",
            "它从临界区内发出了通知"
        )
    }
}

/// Frees (a sale within the window), deadlock (none, and the lock held
/// with no TTL), or stuck (none, for another reason).
pub fn recovery(r: &Recovery) -> Judgement {
    let lock = match (&r.lock.holder, r.lock.no_ttl) {
        _ if !r.lock.held => said!("free", "空闲"),
        (_, true) => said!("held with no TTL", "被持有,没有 TTL"),
        (holder, false) => {
            let (holder, ttl) = (holder.as_deref().unwrap_or("?"), r.lock.ttl_ms.unwrap_or(0));
            said!(
                "held by {holder} for {ttl} ms more",
                "被 {holder} 持有,还剩 {ttl} ms"
            )
        }
    };
    let held = match &r.held {
        Some(how) => said_of!(", {}", ",{}"; how),
        None => Said::default(),
    };
    let window = r.window.as_secs_f64();
    let evidence = said_of!(
        "{}{}; {}; next buyer (waiting up to {window:.0} s) answered {}; lock after: {}",
        "{}{};{};下一个买家(最多等 {window:.0} s)应答 {};之后的锁:{}";
        r.death,
        held,
        restarted(r.restarted),
        r.next.said(),
        lock
    );
    if r.held.is_none() {
        return Judgement::inconclusive(
            &said!(
                "the holder never held the lock in its section",
                "持有者在临界区内从未持有锁"
            ),
            evidence,
        );
    }
    if r.restarted.is_none() {
        return Judgement::inconclusive(&not_dead(), evidence);
    }
    if r.next.sold() && r.next.took <= r.window {
        Judgement::seen(Behaviour::Frees, evidence)
    } else if r.lock.held && r.lock.no_ttl {
        Judgement::seen(Behaviour::Deadlock, evidence)
    } else {
        Judgement::new(Observed::Stuck, evidence)
    }
}

/// The pid `up` restarted a process as, in words.
fn restarted(pid: Option<u32>) -> Said {
    match pid {
        Some(pid) => said!("restarted as pid {pid}", "已重启,PID {pid}"),
        None => said!("not restarted", "没有重启"),
    }
}

/// Why a death proves nothing: `up` never restarted the process.
fn not_dead() -> Said {
    said!(
        "its process did not die (up never restarted it)",
        "它的进程没有死掉(从未被重启)"
    )
}

/// A buyer killed between Redis's pre-decrement and the database's write
/// (`redis-then-pg` in `kill-instance`, stock 1), and the buyer after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BetweenStores {
    /// How and where the buyer died.
    pub death: Said,
    /// Whether it was seen at its write (at its gate, its unit taken in
    /// Redis and the database read) before the kill.
    pub at_write: bool,
    /// The killed buyer's answer: none, if it died before its write.
    pub killed: Reply,
    /// The pid `up` restarted its instance as.
    pub restarted: Option<u32>,
    /// The next buyer, on the other instance: Redis has no unit left for it.
    pub next: Reply,
    /// Redis's books and the database's after both (`None`: the database
    /// never stocked the SKU).
    pub books: Option<BothBooks>,
}

/// Keeps selling (the next buyer sold the database's unit, which the
/// database's books show sold once, none left), loses units (the next
/// buyer told sold out while the database holds stock), oversells, or
/// stuck.
pub fn between_stores(b: &BetweenStores) -> Judgement {
    let books = match &b.books {
        Some(k) => {
            let (redis, sold, back) = (k.redis_remaining, k.redis_sold, k.redis_returned);
            let (pg, pg_sold) = (k.pg_remaining, k.pg_sold);
            said_of!(
                "Redis remaining {redis} (sold {sold}, given back {back}), database remaining {pg}, sold {pg_sold}: {}",
                "Redis 剩余 {redis}(卖出 {sold},退回 {back}),数据库剩余 {pg},卖出 {pg_sold}:{}";
                k.verdict_said()
            )
        }
        None => said!(
            "the database never stocked the SKU",
            "数据库从未给这个 SKU 备货"
        ),
    };
    let evidence = said_of!(
        "{}; {}; next buyer answered {}; books after: {}",
        "{};{};下一个买家应答 {};之后的账目:{}";
        b.death,
        restarted(b.restarted),
        b.next.said(),
        books
    );
    if !b.at_write || b.killed.status != 0 {
        return Judgement::inconclusive(
            &said!(
                "the buyer was not killed between the stores (at its write, unanswered)",
                "买家不是在两个存储之间被杀死的(应在写入时、尚未应答)"
            ),
            evidence,
        );
    }
    if b.restarted.is_none() {
        return Judgement::inconclusive(&not_dead(), evidence);
    }
    let Some(k) = &b.books else {
        return Judgement::inconclusive(&said!("no books to read", "没有账目可读"), evidence);
    };
    if k.pg_oversold > 0 {
        return Judgement::seen(Behaviour::Oversells, evidence);
    }
    if b.next.sold() && k.pg_remaining == 0 && k.pg_sold == 1 {
        Judgement::seen(Behaviour::KeepsSelling, evidence)
    } else if b.next.status == 409 && k.pg_remaining > 0 {
        Judgement::seen(Behaviour::LosesUnits, evidence)
    } else {
        Judgement::new(Observed::Stuck, evidence)
    }
}
