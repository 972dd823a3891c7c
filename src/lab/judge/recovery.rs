//! The judge of a holder that died inside its section, and of the buyer
//! after it (`kill-instance`, `crash-after-acquire`).

use std::time::Duration;

use super::{Judgement, Observed, Reply};
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
