//! The lab's judges: pure functions from what a cell saw (the ledger, the
//! answers, the facts that show the fault landed) to what it observed.
//!
//! Every judge decides in the same order:
//! 1. a fault that did not land proves nothing: `inconclusive`, with the
//!    reason (the holder never entered its section, the lock was not there
//!    to delete, the process did not die, ...);
//! 2. the ledger is the truth: an oversell is an oversell;
//! 3. a safe ledger counts only with the evidence that safety was earned
//!    where the fault struck (a renewal, a stale write refused, a skewed
//!    instance refused), not luck; without it the cell is `inconclusive`.
//!
//! An inconclusive cell fails the run, like a contradiction.
//!
//! The judges, by the family of scenario they judge:
//! - `crowd`: many buyers, judged from the ledger (`race`,
//!   `slow-business`, `retry-storm`);
//! - `duel`: a holder struck inside its section and a newcomer
//!   (`pause-holder`, `lock-vanishes-early`, `lock-vanishes`,
//!   `clock-skew`, a forgotten lock);
//! - `recovery`: a holder that died, and the buyer after it
//!   (`kill-instance`, `crash-after-acquire`), or a buyer killed between
//!   Redis and the database (`redis-then-pg` in `kill-instance`);
//! - `outage`: a store that went away (`redis-restart`, Redlock's nodes);
//! - `doubt`: buyers told `unknown` by a Redis that stopped answering, and
//!   their retries (`redis-pause`);
//! - `database`: PostgreSQL's faults under the variants whose stock it
//!   keeps (`postgres-restart`, `commit-answer-lost`), judged as `doubt` does;
//! - `failover`: a lock's store that failed over under its holder;
//! - `orders`: the order pipeline, judged from the reconciliation of the
//!   ledger with the orders (`crash-before-enqueue`, ...).
//!
//! This module holds what they share: the evidence ([`Reply`], [`Ledger`])
//! and the order they decide in (`decide`).

mod crowd;
mod database;
mod doubt;
mod duel;
mod failover;
mod orders;
mod outage;
mod pause;
mod recovery;
pub mod second;
#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

pub use self::crowd::{one_instance, race, retry_storm, slow_business};
pub use self::database::{DatabaseCrash, LostAnswer, commit_answer_lost, database_crash};
pub use self::doubt::{Doubted, RedisPause, redis_pause};
pub use self::duel::{
    Deletion, Duel, clock_skew, forgotten_lock, lock_vanishes, lock_vanishes_early,
};
pub use self::failover::{Failover, Replication, failover};
pub use self::orders::{Books, LostLedger, books, ledger_lost};
pub use self::outage::{MajorityDown, majority_down, minority_down, redis_restart};
pub use self::pause::{pause_holder, silent_holder};
pub use self::recovery::{BetweenStores, Recovery, between_stores, recovery};
use crate::client::Deduction;
use crate::said;
use crate::variants::Behaviour;
use crate::wire::{Said, StateSnapshot};

pub(crate) use crate::said_of;

/// What a cell saw, as one word of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observed {
    /// A behaviour a variant can claim.
    Seen(Behaviour),
    /// Never sold again, and not the deadlock a claim can name (no orphaned lock).
    Stuck,
    /// `oversold` below zero: stock left with no sale recorded. Nothing
    /// read from this ledger can be trusted.
    LedgerBroken,
    /// The fault did not land, or the outcome came without the evidence
    /// that would make it mean something.
    Inconclusive,
    /// The cell could not run (an error, a timeout).
    Error,
}

impl Observed {
    pub fn name(self) -> &'static str {
        match self {
            Observed::Seen(behaviour) => behaviour.name(),
            Observed::Stuck => "stuck",
            Observed::LedgerBroken => "ledger broken",
            Observed::Inconclusive => "inconclusive",
            Observed::Error => "error",
        }
    }

    /// [`Observed::name`] in Chinese.
    pub fn name_zh(self) -> &'static str {
        match self {
            Observed::Seen(behaviour) => behaviour.name_zh(),
            Observed::Stuck => "卡住",
            Observed::LedgerBroken => "账本损坏",
            Observed::Inconclusive => "无法判定",
            Observed::Error => "出错",
        }
    }
}

/// A judge's decision and the evidence it read, for people, in English
/// and in Chinese.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judgement {
    pub observed: Observed,
    pub evidence: Said,
}

impl Judgement {
    fn new(observed: Observed, evidence: Said) -> Self {
        // Every judgement a test makes is checked to be said in Chinese too.
        #[cfg(test)]
        tests::said_in_both(&evidence);
        Judgement { observed, evidence }
    }

    fn seen(behaviour: Behaviour, evidence: Said) -> Self {
        Judgement::new(Observed::Seen(behaviour), evidence)
    }

    fn inconclusive(why: &Said, evidence: Said) -> Self {
        Judgement::new(
            Observed::Inconclusive,
            said_of!("{}: {}", "{}:{}"; why, evidence),
        )
    }
}

/// A fact that must hold, or the reason it does not.
pub(super) type Check = Result<(), Said>;

pub(super) fn check(holds: bool, otherwise: impl FnOnce() -> Said) -> Check {
    if holds { Ok(()) } else { Err(otherwise()) }
}

/// One request's answer as the lab saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reply {
    /// The HTTP status; 0 when no answer came (the connection dropped: the
    /// process died).
    pub status: u16,
    /// Why it was busy (`lock_held`, `lock_lost`, `stale_token`, ...).
    pub reason: Option<String>,
    /// A retry answered from its request id's record.
    pub replayed: bool,
    /// Answered `unknown` (503): the write was sent and no answer came.
    pub unknown: bool,
    /// The unit sold (a 200's, replayed or not).
    pub unit: Option<i64>,
    /// From sending it to its answer.
    pub took: Duration,
}

impl From<Deduction> for Reply {
    fn from(answer: Deduction) -> Self {
        let (unknown, unit) = (answer.unknown(), answer.unit());
        Reply {
            status: answer.status,
            reason: answer.reason().map(str::to_owned),
            replayed: answer.replayed(),
            unknown,
            unit: unit.filter(|_| answer.status == 200),
            took: answer.took,
        }
    }
}

impl Reply {
    pub fn sold(&self) -> bool {
        self.status == 200
    }

    /// Answered 429 for this reason.
    pub fn refused(&self, reason: &str) -> bool {
        self.status == 429 && self.reason.as_deref() == Some(reason)
    }

    /// Sold or sold out: an answer a retry of its request id can only repeat.
    pub fn is_final(&self) -> bool {
        matches!(self.status, 200 | 409)
    }
}

impl Reply {
    /// The answer without its timing: "200 sold", "429 stale_token", "no answer".
    pub fn answer(&self) -> String {
        self.answer_said().en
    }

    /// [`Reply::answer`] in both languages (a reason is the same in both).
    pub fn answer_said(&self) -> Said {
        let answer = match (self.status, &self.reason) {
            (0, _) => said!("no answer", "无应答"),
            (status, Some(reason)) => Said::same(format!("{status} {reason}")),
            (status, None) if self.unknown => said!("{status} unknown", "{status} 结果未知"),
            (200, None) => said!("200 sold", "200 已售出"),
            (status, None) => Said::same(status.to_string()),
        };
        if self.replayed {
            said_of!("{} (replayed)", "{}(重放)"; answer)
        } else {
            answer
        }
    }

    /// The answer and its timing: "200 sold after 0.01 s".
    pub fn said(&self) -> Said {
        let secs = self.took.as_secs_f64();
        said_of!("{} after {secs:.2} s", "{}(用时 {secs:.2} s)"; self.answer_said())
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.said().en)
    }
}

/// What the ledger and the overlap witness say about one SKU after a cell.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ledger {
    pub state: StateSnapshot,
    /// Pairs of critical sections that overlapped in time.
    pub overlaps: usize,
    /// The first such pair's holders (owner#fencing token).
    pub overlap_example: Option<Said>,
    /// Where its timeline can be seen (a page of the stack), if it lasts.
    pub timeline: Option<String>,
    /// Critical sections the timeline holds, and the longest one's time
    /// from its entry to its lock's release.
    pub sections: usize,
    pub longest_ms: u64,
}

impl Ledger {
    /// The instances that answered at least one buyer.
    fn answering(&self) -> Vec<&String> {
        self.state
            .per_instance
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(name, _)| name)
            .collect()
    }

    /// The ledger's own verdict, when it has one: broken, or oversold.
    fn failure(&self) -> Option<Observed> {
        if self.state.oversold < 0 {
            Some(Observed::LedgerBroken)
        } else if self.state.oversold > 0 || self.state.duplicates > 0 {
            Some(Observed::Seen(Behaviour::Oversells))
        } else {
            None
        }
    }

    /// The ledger's numbers in words, in both languages.
    pub fn said(&self) -> Said {
        let s = &self.state;
        let (oversold, duplicates, overlaps) = (s.oversold, s.duplicates, self.overlaps);
        let mut said = said!(
            "oversold {oversold}, duplicates {duplicates}, overlapping sections {overlaps}",
            "超卖 {oversold},重复售出 {duplicates},重叠的临界区 {overlaps}"
        );
        if let Some(example) = &self.overlap_example {
            said = said.then(
                &said!(" ", ""),
                &said_of!("(e.g. {})", "(例如 {})"; example),
            );
        }
        let (sold, initial, busy, renewals) = (s.sold, s.initial, s.busy, s.renewals);
        let (lost, fenced) = (s.lost_locks, s.fenced_rejections);
        said = said.then(
            &said!(", ", ","),
            &said!(
                "sold {sold} of {initial}, busy {busy}, renewals {renewals}, lost leases {lost}, stale writes refused {fenced}",
                "卖出 {sold}/{initial},忙 {busy},续约 {renewals},丢失的租约 {lost},被拒绝的过期写入 {fenced}"
            ),
        );
        if let Some(timeline) = &self.timeline {
            said = said.then(
                &said!("; ", ";"),
                &said!("timeline {timeline}", "时间线 {timeline}"),
            );
        }
        said
    }
}

impl fmt::Display for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.said().en)
    }
}

/// The common order of every judge over a ledger: landed, then the
/// ledger's verdict, then the evidence that a safe ledger was earned.
fn decide(landed: Check, ledger: &Ledger, earned: Check, evidence: Said) -> Judgement {
    if let Err(why) = landed {
        return Judgement::inconclusive(&why, evidence);
    }
    if let Some(failure) = ledger.failure() {
        return Judgement::new(failure, evidence);
    }
    match earned {
        Ok(()) => Judgement::seen(Behaviour::Safe, evidence),
        Err(why) => Judgement::inconclusive(
            &said_of!("safe by the ledger, but {}", "按账本是安全的,但{}"; why),
            evidence,
        ),
    }
}
