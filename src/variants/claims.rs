//! What a variant claims to do in each scenario of `stocklock lab`: its row
//! of the teaching matrix, written in the variant's own file.
//!
//! [`Claims`] has one field per scenario and no `Default`: a new scenario
//! does not compile until every family of variants (`family.rs`, where a
//! variant takes its table from and states only where it differs) has
//! said what it does in it. The lab plays each scenario and compares the
//! [`Behaviour`] it observed with the one claimed.

/// A kind of behaviour a scenario can show.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Behaviour {
    /// The scenario does not apply: there is nothing for its fault to hit.
    NotApplicable,
    /// No sale that the stock does not back, no unit sold twice.
    Safe,
    /// Sales that no stock backs, or a unit sold twice.
    Oversells,
    /// The SKU never sells again: a lock nobody holds, with no TTL.
    Deadlock,
    /// A dead holder's lock frees itself: a sale within its lease + 1 s.
    Frees,
    /// Sells again soon after its Redis came back.
    Recovers,
    /// Sells its whole stock, safely, through the fault.
    KeepsSelling,
    /// Refuses every buyer, with a reason, while the fault lasts, and sells
    /// again when it is over.
    Busy,
    /// Units sold that no order will ever name, or given back to nobody:
    /// stock that can no longer be sold (under-selling, 少卖).
    LosesUnits,
}

impl Behaviour {
    /// A failure the lab shows: stock oversold, a lock nobody frees, units
    /// lost.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Behaviour::Oversells | Behaviour::Deadlock | Behaviour::LosesUnits
        )
    }

    /// The word shown in the matrix and on the wire (`-`: not applicable).
    pub fn name(self) -> &'static str {
        match self {
            Behaviour::NotApplicable => "-",
            Behaviour::Safe => "safe",
            Behaviour::Oversells => "oversells",
            Behaviour::Deadlock => "deadlock",
            Behaviour::Frees => "frees",
            Behaviour::Recovers => "recovers",
            Behaviour::KeepsSelling => "keeps selling",
            Behaviour::Busy => "busy",
            Behaviour::LosesUnits => "loses units",
        }
    }
}

/// One cell of a variant's row: the behaviour, and a few words of why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claim {
    pub behaviour: Behaviour,
    /// Shown beside the behaviour ("renewed", "stale token refused"); may be empty.
    pub note: &'static str,
}

impl Claim {
    pub const NOT_APPLICABLE: Claim = Claim::not_applicable("");

    pub const fn not_applicable(note: &'static str) -> Claim {
        Claim::new(Behaviour::NotApplicable, note)
    }
    pub const fn safe(note: &'static str) -> Claim {
        Claim::new(Behaviour::Safe, note)
    }
    pub const fn oversells(note: &'static str) -> Claim {
        Claim::new(Behaviour::Oversells, note)
    }
    pub const fn deadlock(note: &'static str) -> Claim {
        Claim::new(Behaviour::Deadlock, note)
    }
    pub const fn frees(note: &'static str) -> Claim {
        Claim::new(Behaviour::Frees, note)
    }
    pub const fn recovers(note: &'static str) -> Claim {
        Claim::new(Behaviour::Recovers, note)
    }
    pub const fn keeps_selling(note: &'static str) -> Claim {
        Claim::new(Behaviour::KeepsSelling, note)
    }
    pub const fn busy(note: &'static str) -> Claim {
        Claim::new(Behaviour::Busy, note)
    }
    pub const fn loses_units(note: &'static str) -> Claim {
        Claim::new(Behaviour::LosesUnits, note)
    }

    const fn new(behaviour: Behaviour, note: &'static str) -> Claim {
        Claim { behaviour, note }
    }

    /// Whether the lab has a cell for it.
    pub fn applies(&self) -> bool {
        self.behaviour != Behaviour::NotApplicable
    }

    /// `safe`, `frees (after lease)`, `- (no gap: one script)`.
    pub fn text(&self) -> String {
        match self.note {
            "" => self.behaviour.name().to_owned(),
            note => format!("{} ({note})", self.behaviour.name()),
        }
    }
}

/// A variant's row of the matrix: one claim per scenario of the lab (the
/// scenarios themselves are described in `crate::lab::scenario`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claims {
    /// The race sent to one instance only (one process, as article 001
    /// begins: a `synchronized` block is enough there).
    pub one_instance: Claim,
    /// Two instances behind nginx, 400 buyers, 64 at once.
    pub race: Claim,
    /// The business work outlives the lease.
    pub slow_business: Claim,
    /// The holder's process crashes right after taking the lock.
    pub crash_after_acquire: Claim,
    /// The holder freezes (SIGSTOP) longer than its lease, right before its write.
    pub pause_holder: Claim,
    /// The holder's instance is killed (SIGKILL) in the middle of its work.
    pub kill_instance: Claim,
    /// The lock key is deleted under its holder while it works, before its
    /// watchdog's next renewal (a failover, a clock jump).
    pub lock_vanishes_early: Claim,
    /// The lock key is deleted under its holder at the worst moment: after
    /// the watchdog's last renewal before the write.
    pub lock_vanishes: Claim,
    /// Sixteen concurrent retries of one `request_id`.
    pub retry_storm: Claim,
    /// The second instance's clock runs 5 s ahead.
    pub clock_skew: Claim,
    /// Redis stops, and comes back empty.
    pub redis_restart: Claim,
    /// Redis stops answering for longer than an instance waits, under
    /// buyers with request ids, and answers again with its data.
    pub redis_pause: Claim,
    /// Two of Redlock's five nodes are dead.
    pub redlock_minority_down: Claim,
    /// Three of Redlock's five nodes are dead.
    pub redlock_majority_down: Claim,
    /// A node that granted the lock restarts empty under a frozen holder.
    pub redlock_restart_without_persistence: Claim,
    /// The lock store fails over under a holder: the Redis master dies
    /// before the lock reached its replica and Sentinel promotes the
    /// replica; etcd's leader, a ZooKeeper server of three, is killed.
    pub failover: Claim,
    /// The same Redis failover, the holder having asked `WAIT` for one
    /// replica after taking the lock (`replicas=1`), replication held back
    /// before the lock reached the replica.
    pub failover_wait_early: Claim,
    /// The same, replication held back after `WAIT` saw the lock on the
    /// replica: the holder's write is what the failover loses.
    pub failover_wait: Claim,
    /// The instance crashes right after a sale's script, before anything
    /// else of that request runs (`lua-then-queue`: before its `XADD`).
    pub crash_before_enqueue: Claim,
    /// The order worker that committed a batch dies before acking it.
    pub worker_crash_before_ack: Claim,
    /// PostgreSQL stops while buyers buy, and comes back (the database's
    /// variants: it crashes under them).
    pub postgres_restart: Claim,
    /// PostgreSQL commits a sale and the answer never reaches the
    /// instance: its connection closes on the way back.
    pub commit_answer_lost: Claim,
    /// Reservations not paid within `--pay-within` expire; half are paid.
    pub reservation_expiry: Claim,
    /// Redis restarts empty with orders on their way, then a reset and
    /// more sales: judged by reconcile, which must report what was lost.
    pub redis_data_loss: Claim,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_reads_as_its_behaviour_and_note() {
        assert_eq!(Claim::safe("").text(), "safe");
        assert_eq!(
            Claim::safe("stale token refused").text(),
            "safe (stale token refused)"
        );
        assert_eq!(Claim::NOT_APPLICABLE.text(), "-");
        assert_eq!(
            Claim::not_applicable("no gap: one script").text(),
            "- (no gap: one script)"
        );
        assert!(!Claim::NOT_APPLICABLE.applies());
        assert!(Claim::keeps_selling("").applies());
    }
}
