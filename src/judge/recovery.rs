//! The judge of a holder that died inside its section, and of the buyer
//! after it (`kill-instance`, `crash-after-acquire`); and of a buyer
//! killed between two stores (`kill-instance` for `redis-then-pg`).

use std::time::Duration;

use super::{Judgement, Observed, Reply};
use crate::pgstock::both::BothBooks;
use crate::variants::Behaviour;
use crate::wire::LockState;

/// A holder that died inside its section, and the buyer after it
/// (`kill-instance`, `crash-after-acquire`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// How and where the holder died: "instance a (pid 12) killed with SIGKILL".
    pub death: String,
    /// How we know it held the lock when it died (announced from inside its
    /// section; or, for a crash before its section, its lock left with no
    /// TTL); `None`: no proof.
    pub held: Option<&'static str>,
    /// The pid `up` restarted it as: proof the process really died.
    pub restarted: Option<u32>,
    /// The next buyer, on the other instance, waiting up to `window`.
    pub next: Reply,
    /// Lease + 1 s: any lock with that lease frees itself by then.
    pub window: Duration,
    /// The lock after the window.
    pub lock: LockState,
}

/// Frees (a sale within the window), deadlock (none, and the lock held
/// with no TTL), or stuck (none, for another reason).
pub fn recovery(r: &Recovery) -> Judgement {
    let lock = match (&r.lock.holder, r.lock.no_ttl) {
        _ if !r.lock.held => "free".to_owned(),
        (_, true) => "held with no TTL".to_owned(),
        (holder, false) => format!(
            "held by {} for {} ms more",
            holder.as_deref().unwrap_or("?"),
            r.lock.ttl_ms.unwrap_or(0)
        ),
    };
    let evidence = format!(
        "{}{}; {}; next buyer (waiting up to {:.0} s) answered {}; lock after: {lock}",
        r.death,
        r.held.map(|how| format!(", {how}")).unwrap_or_default(),
        match r.restarted {
            Some(pid) => format!("restarted as pid {pid}"),
            None => "not restarted".to_owned(),
        },
        r.window.as_secs_f64(),
        r.next,
    );
    if r.held.is_none() {
        return Judgement::inconclusive("the holder never held the lock in its section", evidence);
    }
    if r.restarted.is_none() {
        return Judgement::inconclusive(
            "its process did not die (up never restarted it)",
            evidence,
        );
    }
    if r.next.sold() && r.next.took <= r.window {
        Judgement::seen(Behaviour::Frees, evidence)
    } else if r.lock.held && r.lock.no_ttl {
        Judgement::seen(Behaviour::Deadlock, evidence)
    } else {
        Judgement::new(Observed::Stuck, evidence)
    }
}

/// A buyer killed between Redis's pre-decrement and the database's write
/// (`redis-then-pg` in `kill-instance`, stock 1), and the buyer after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BetweenStores {
    /// How and where the buyer died.
    pub death: String,
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
        Some(k) => format!(
            "Redis remaining {} (sold {}, given back {}), database remaining {}, sold {}: {}",
            k.redis_remaining,
            k.redis_sold,
            k.redis_returned,
            k.pg_remaining,
            k.pg_sold,
            k.verdict()
        ),
        None => "the database never stocked the SKU".to_owned(),
    };
    let evidence = format!(
        "{}; {}; next buyer answered {}; books after: {books}",
        b.death,
        match b.restarted {
            Some(pid) => format!("restarted as pid {pid}"),
            None => "not restarted".to_owned(),
        },
        b.next,
    );
    if !b.at_write || b.killed.status != 0 {
        return Judgement::inconclusive(
            "the buyer was not killed between the stores (at its write, unanswered)",
            evidence,
        );
    }
    if b.restarted.is_none() {
        return Judgement::inconclusive(
            "its process did not die (up never restarted it)",
            evidence,
        );
    }
    let Some(k) = &b.books else {
        return Judgement::inconclusive("no books to read", evidence);
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
