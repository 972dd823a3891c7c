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

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::client::Deduction;
use crate::variants::Behaviour;
use crate::wire::{LockState, StateSnapshot};

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
}

/// A judge's decision and the evidence it read, for people.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judgement {
    pub observed: Observed,
    pub evidence: String,
}

impl Judgement {
    fn new(observed: Observed, evidence: String) -> Self {
        Judgement { observed, evidence }
    }

    fn seen(behaviour: Behaviour, evidence: String) -> Self {
        Judgement::new(Observed::Seen(behaviour), evidence)
    }

    fn inconclusive(why: &str, evidence: String) -> Self {
        Judgement::new(Observed::Inconclusive, format!("{why}: {evidence}"))
    }
}

/// A fact that must hold, or the reason it does not.
type Check = Result<(), String>;

fn check(holds: bool, otherwise: impl FnOnce() -> String) -> Check {
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
    /// From sending it to its answer.
    pub took: Duration,
}

impl From<Deduction> for Reply {
    fn from(answer: Deduction) -> Self {
        Reply {
            status: answer.status,
            reason: answer.reason().map(str::to_owned),
            replayed: answer.replayed(),
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
}

impl Reply {
    /// The answer without its timing: "200 sold", "429 stale_token", "no answer".
    pub fn answer(&self) -> String {
        let answer = match (self.status, &self.reason) {
            (0, _) => "no answer".to_owned(),
            (status, Some(reason)) => format!("{status} {reason}"),
            (200, None) => "200 sold".to_owned(),
            (status, None) => status.to_string(),
        };
        if self.replayed {
            format!("{answer} (replayed)")
        } else {
            answer
        }
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} after {:.2} s",
            self.answer(),
            self.took.as_secs_f64()
        )
    }
}

/// What the ledger and the overlap witness say about one SKU after a cell.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ledger {
    pub state: StateSnapshot,
    /// Pairs of critical sections that overlapped in time.
    pub overlaps: usize,
    /// The first such pair's holders (owner#fencing token).
    pub overlap_example: Option<String>,
}

impl Ledger {
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
}

impl fmt::Display for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.state;
        write!(
            f,
            "oversold {}, duplicates {}, overlapping sections {}",
            s.oversold, s.duplicates, self.overlaps
        )?;
        if let Some(example) = &self.overlap_example {
            write!(f, " (e.g. {example})")?;
        }
        write!(
            f,
            ", sold {} of {}, busy {}, renewals {}, lost leases {}, stale writes refused {}",
            s.sold, s.initial, s.busy, s.renewals, s.lost_locks, s.fenced_rejections
        )
    }
}

/// The common order of every judge over a ledger: landed, then the
/// ledger's verdict, then the evidence that a safe ledger was earned.
fn decide(landed: Check, ledger: &Ledger, earned: Check, evidence: String) -> Judgement {
    if let Err(why) = landed {
        return Judgement::inconclusive(&why, evidence);
    }
    if let Some(failure) = ledger.failure() {
        return Judgement::new(failure, evidence);
    }
    match earned {
        Ok(()) => Judgement::seen(Behaviour::Safe, evidence),
        Err(why) => Judgement::inconclusive(&format!("safe by the ledger, but {why}"), evidence),
    }
}

/// `race`: a safe race needs both instances to have answered (a race on
/// one instance tests nothing of a distributed lock). Under-selling is
/// shown beside the verdict, with the variant's reason for it if it
/// claims one (`undersells`).
pub fn race(ledger: &Ledger, undersells: Option<&str>) -> Judgement {
    let answering: Vec<&String> = ledger
        .state
        .per_instance
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(name, _)| name)
        .collect();
    let served = ledger
        .state
        .per_instance
        .iter()
        .map(|(name, n)| format!("{name} answered {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let s = &ledger.state;
    let unsold = if s.remaining > 0 && s.busy > 0 {
        format!(
            "; unsold {} while {} buyers were refused: {}",
            s.remaining,
            s.busy,
            undersells.unwrap_or("not expected of this variant")
        )
    } else {
        String::new()
    };
    let landed = check(answering.len() >= 2, || {
        format!("only {answering:?} answered: no race between instances")
    });
    decide(
        landed,
        ledger,
        Ok(()),
        format!("{served}; {ledger}{unsold}"),
    )
}

/// `slow-business`: a safe cell needs the lease to have been renewed
/// while the work outlived it.
pub fn slow_business(ledger: &Ledger) -> Judgement {
    let landed = check(ledger.state.sold > 0, || "no buyer got through".to_owned());
    let earned = check(ledger.state.renewals > 0, || {
        "no lease was renewed: the work never outlived one".to_owned()
    });
    decide(landed, ledger, earned, ledger.to_string())
}

/// A holder inside its section on one instance, a newcomer on the other
/// once the fault struck.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Duel {
    /// The holder announced it was inside its section (between its read
    /// and its write) before the fault struck.
    pub entered: bool,
    pub holder: Reply,
    pub newcomer: Reply,
    pub ledger: Ledger,
}

impl Duel {
    fn evidence(&self, before: &str) -> String {
        format!(
            "{before}holder answered {}, the newcomer {}; {}",
            self.holder, self.newcomer, self.ledger
        )
    }

    fn entered(&self) -> Check {
        check(self.entered, || {
            "the holder never entered its section (no announcement within the timeout)".to_owned()
        })
    }

    /// The holder was frozen for (at least) `pause`.
    fn frozen(&self, pause: Duration) -> Check {
        check(self.holder.took >= pause, || {
            format!(
                "the holder answered within {:.2} s: it was not frozen for {:.1} s",
                self.holder.took.as_secs_f64(),
                pause.as_secs_f64()
            )
        })
    }

    /// The frozen holder's late write was refused by the store and counted.
    fn stale_write_refused(&self) -> Check {
        check(
            self.holder.refused("stale_token") && self.ledger.state.fenced_rejections > 0,
            || {
                format!(
                    "the frozen holder answered {}: no stale write was refused",
                    self.holder
                )
            },
        )
    }
}

/// `pause-holder`: the holder froze longer than its lease right before
/// its write. Safe only when its stale write was refused.
pub fn pause_holder(duel: &Duel, pause: Duration) -> Judgement {
    let landed = duel.entered().and_then(|()| duel.frozen(pause));
    decide(
        landed,
        &duel.ledger,
        duel.stale_write_refused(),
        duel.evidence(&format!("froze {:.1} s; ", pause.as_secs_f64())),
    )
}

/// `lock-vanishes`: the lock was deleted under its holder. Safe only when
/// the holder learned it (`lock_lost`) or was refused (`stale_token`).
pub fn lock_vanishes(duel: &Duel, deleted: bool) -> Judgement {
    let landed = duel.entered().and_then(|()| {
        check(deleted, || {
            "the lock was not there to delete (the action answered deleted: false)".to_owned()
        })
    });
    let earned = check(
        duel.holder.refused("lock_lost") || duel.holder.refused("stale_token"),
        || format!("the holder answered {}: it never noticed", duel.holder),
    );
    decide(
        landed,
        &duel.ledger,
        earned,
        duel.evidence("lock deleted; "),
    )
}

/// `clock-skew`: the newcomer's instance runs `skew_ms` ahead (as it
/// answered the action). Safe only when that instance was refused while
/// the holder held the lock.
pub fn clock_skew(duel: &Duel, skew_ms: i64) -> Judgement {
    let landed = check(skew_ms > 0, || {
        format!("the newcomer's clock was not skewed (it runs {skew_ms} ms ahead)")
    })
    .and_then(|()| duel.entered());
    let earned = check(duel.newcomer.refused("lock_held"), || {
        format!(
            "the skewed instance answered {}, not refused while the lock was held",
            duel.newcomer
        )
    });
    decide(
        landed,
        &duel.ledger,
        earned,
        duel.evidence(&format!("the newcomer's clock {skew_ms} ms ahead; ")),
    )
}

/// `redlock-restart-without-persistence`: the store forgot the lock of a
/// holder frozen for `pause` (`story`: how; `forgotten`: or why it did
/// not). Safe only when the holder's late write was refused.
pub fn forgotten_lock(duel: &Duel, story: &str, forgotten: &Check, pause: Duration) -> Judgement {
    let landed = duel
        .entered()
        .and_then(|()| forgotten.clone())
        .and_then(|()| duel.frozen(pause));
    decide(
        landed,
        &duel.ledger,
        duel.stale_write_refused(),
        duel.evidence(&format!("{story}; ")),
    )
}

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

/// `retry-storm`: concurrent retries of one request id, and their answers
/// ("200 sold", "429 in_progress", ...) by count.
pub fn retry_storm(answers: &BTreeMap<String, usize>, ledger: &Ledger) -> Judgement {
    let s = &ledger.state;
    let in_progress = answers.get("429 in_progress").copied().unwrap_or(0);
    let evidence = format!(
        "sold {} (must be 1), replays {}, answers {answers:?}",
        s.sold, s.replays
    );
    if s.replays == 0 && in_progress == 0 && s.sold < 2 {
        return Judgement::inconclusive(
            "no retry met another attempt (no replay, no in_progress)",
            evidence,
        );
    }
    if let Some(failure) = ledger.failure() {
        return Judgement::new(failure, evidence);
    }
    match s.sold {
        0 => Judgement::new(Observed::Stuck, evidence),
        1 => Judgement::seen(Behaviour::Safe, evidence),
        _ => Judgement::seen(Behaviour::Oversells, evidence),
    }
}

/// `redis-restart`: the answer while Redis was down, and how long after it
/// came back a sale worked again (`None`: not within the bound).
pub fn redis_restart(down: &Reply, selling_again_after: Option<Duration>) -> Judgement {
    let evidence = format!(
        "while down: {down}; {}",
        match selling_again_after {
            Some(after) => format!(
                "selling again {:.2} s after Redis came back",
                after.as_secs_f64()
            ),
            None => "not selling again after Redis came back".to_owned(),
        }
    );
    if down.status != 503 {
        return Judgement::inconclusive("Redis was stopped, yet no 503 came", evidence);
    }
    match selling_again_after {
        Some(_) => Judgement::seen(Behaviour::Recovers, evidence),
        None => Judgement::new(Observed::Stuck, evidence),
    }
}

/// `redlock-minority-down`: the race on three nodes of five.
pub fn minority_down(killed: &Check, ledger: &Ledger) -> Judgement {
    let evidence = format!("nodes 4 and 5 of 5 killed, a majority is 3; {ledger}");
    if let Err(why) = killed {
        return Judgement::inconclusive(why, evidence);
    }
    if let Some(failure) = ledger.failure() {
        return Judgement::new(failure, evidence);
    }
    let s = &ledger.state;
    if s.remaining == 0 && s.sold == s.initial {
        Judgement::seen(Behaviour::KeepsSelling, evidence)
    } else {
        Judgement::new(Observed::Stuck, evidence)
    }
}

/// `redlock-majority-down`: answers with three nodes of five dead (one
/// not waiting, one waiting), then how long until a sale worked again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MajorityDown {
    pub fast: Reply,
    pub waited: Reply,
    pub selling_again_after: Option<Duration>,
    pub ledger: Ledger,
}

pub fn majority_down(killed: &Check, m: &MajorityDown) -> Judgement {
    let evidence = format!(
        "nodes 3, 4 and 5 of 5 killed: answered {} (wait_ms=0) and {} (wait_ms=500); nodes back empty, {}; oversold {}",
        m.fast,
        m.waited,
        match m.selling_again_after {
            Some(after) => format!("selling again after {:.2} s", after.as_secs_f64()),
            None => "not selling again".to_owned(),
        },
        m.ledger.state.oversold
    );
    if let Err(why) = killed {
        return Judgement::inconclusive(why, evidence);
    }
    if let Some(failure) = m.ledger.failure() {
        return Judgement::new(failure, evidence);
    }
    let no_quorum = |reply: &Reply| reply.refused("no_quorum");
    if m.fast.sold() || m.waited.sold() {
        Judgement::seen(Behaviour::KeepsSelling, evidence)
    } else if no_quorum(&m.fast) && no_quorum(&m.waited) && m.selling_again_after.is_some() {
        Judgement::seen(Behaviour::Busy, evidence)
    } else {
        Judgement::new(Observed::Stuck, evidence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Behaviour::*;

    fn state(initial: i64, remaining: i64, sold: i64) -> StateSnapshot {
        StateSnapshot::counted(initial, remaining, sold)
    }

    fn ledger(state: StateSnapshot) -> Ledger {
        Ledger {
            state,
            ..Ledger::default()
        }
    }

    fn reply(status: u16, reason: Option<&str>, took_ms: u64) -> Reply {
        Reply {
            status,
            reason: reason.map(str::to_owned),
            replayed: false,
            took: Duration::from_millis(took_ms),
        }
    }

    fn observed(judgement: Judgement) -> Observed {
        judgement.observed
    }

    #[test]
    fn race_needs_both_instances() {
        let mut both = state(50, 0, 50);
        both.per_instance = [("a".into(), 200), ("b".into(), 200)].into();
        assert_eq!(
            observed(race(&ledger(both.clone()), None)),
            Observed::Seen(Safe)
        );

        let mut oversold = state(50, 0, 53);
        oversold.per_instance = both.per_instance.clone();
        assert_eq!(
            observed(race(&ledger(oversold), None)),
            Observed::Seen(Oversells)
        );

        let mut alone = state(50, 0, 50);
        alone.per_instance = [("a".into(), 400), ("b".into(), 0)].into();
        let judgement = race(&ledger(alone), None);
        assert_eq!(judgement.observed, Observed::Inconclusive);
        assert!(judgement.evidence.contains("no race between instances"));

        let mut broken = state(50, 10, 30);
        broken.per_instance = both.per_instance;
        assert_eq!(
            observed(race(&ledger(broken), None)),
            Observed::LedgerBroken
        );
    }

    #[test]
    fn race_shows_under_selling() {
        let mut undersold = state(50, 45, 5);
        undersold.busy = 395;
        undersold.per_instance = [("a".into(), 200), ("b".into(), 200)].into();
        let judgement = race(&ledger(undersold.clone()), Some("fails fast"));
        assert_eq!(judgement.observed, Observed::Seen(Safe));
        assert!(
            judgement
                .evidence
                .contains("unsold 45 while 395 buyers were refused: fails fast")
        );
        let unexpected = race(&ledger(undersold), None);
        assert!(
            unexpected
                .evidence
                .contains("refused: not expected of this variant")
        );
    }

    #[test]
    fn slow_business_is_safe_only_when_renewed() {
        let mut renewed = state(5, 2, 3);
        renewed.renewals = 12;
        assert_eq!(
            observed(slow_business(&ledger(renewed))),
            Observed::Seen(Safe)
        );
        assert_eq!(
            observed(slow_business(&ledger(state(5, 3, 3)))),
            Observed::Seen(Oversells)
        );
        assert_eq!(
            observed(slow_business(&ledger(state(5, 2, 3)))),
            Observed::Inconclusive
        );
    }

    fn duel(holder: Reply, newcomer: Reply, state: StateSnapshot) -> Duel {
        Duel {
            entered: true,
            holder,
            newcomer,
            ledger: ledger(state),
        }
    }

    const PAUSE: Duration = Duration::from_millis(1500);

    #[test]
    fn pause_holder_is_safe_only_when_the_stale_write_was_refused() {
        let mut refused = state(5, 4, 1);
        refused.fenced_rejections = 1;
        let fenced = duel(
            reply(429, Some("stale_token"), 1510),
            reply(200, None, 320),
            refused,
        );
        assert_eq!(observed(pause_holder(&fenced, PAUSE)), Observed::Seen(Safe));

        let watchdog = duel(
            reply(200, None, 1510),
            reply(200, None, 320),
            state(5, 4, 2),
        );
        assert_eq!(
            observed(pause_holder(&watchdog, PAUSE)),
            Observed::Seen(Oversells)
        );

        // Safe by the ledger, but the newcomer only waited its turn.
        let waited = duel(
            reply(200, None, 1510),
            reply(200, None, 1520),
            state(5, 3, 2),
        );
        assert_eq!(
            observed(pause_holder(&waited, PAUSE)),
            Observed::Inconclusive
        );

        // Not frozen: the pause never landed, whatever the ledger says.
        let quick = duel(reply(200, None, 20), reply(200, None, 320), state(5, 4, 2));
        assert_eq!(
            observed(pause_holder(&quick, PAUSE)),
            Observed::Inconclusive
        );

        let never = Duel {
            entered: false,
            ..fenced
        };
        let judgement = pause_holder(&never, PAUSE);
        assert_eq!(judgement.observed, Observed::Inconclusive);
        assert!(judgement.evidence.contains("never entered its section"));
    }

    #[test]
    fn lock_vanishes_is_safe_only_when_the_holder_noticed() {
        let backed_off = duel(
            reply(429, Some("lock_lost"), 1000),
            reply(200, None, 5),
            state(5, 4, 1),
        );
        assert_eq!(
            observed(lock_vanishes(&backed_off, true)),
            Observed::Seen(Safe)
        );
        let fenced = duel(
            reply(429, Some("stale_token"), 1000),
            reply(200, None, 5),
            state(5, 4, 1),
        );
        assert_eq!(observed(lock_vanishes(&fenced, true)), Observed::Seen(Safe));
        let token = duel(reply(200, None, 1000), reply(200, None, 5), state(5, 4, 2));
        assert_eq!(
            observed(lock_vanishes(&token, true)),
            Observed::Seen(Oversells)
        );
        // The newcomer found the lock held: the deletion did not happen.
        let unnoticed = duel(
            reply(200, None, 1000),
            reply(429, Some("lock_held"), 5),
            state(5, 4, 1),
        );
        assert_eq!(
            observed(lock_vanishes(&unnoticed, true)),
            Observed::Inconclusive
        );
        assert_eq!(
            observed(lock_vanishes(&backed_off, false)),
            Observed::Inconclusive
        );
    }

    #[test]
    fn clock_skew_is_safe_only_when_the_skewed_instance_was_refused() {
        let refused = duel(
            reply(200, None, 500),
            reply(429, Some("lock_held"), 3),
            state(5, 4, 1),
        );
        assert_eq!(observed(clock_skew(&refused, 5000)), Observed::Seen(Safe));
        let stolen = duel(reply(200, None, 500), reply(200, None, 3), state(5, 4, 2));
        assert_eq!(
            observed(clock_skew(&stolen, 5000)),
            Observed::Seen(Oversells)
        );
        assert_eq!(observed(clock_skew(&refused, 0)), Observed::Inconclusive);
        // Safe, but the newcomer came after the holder was done.
        let late = duel(reply(200, None, 500), reply(200, None, 3), state(5, 3, 2));
        assert_eq!(observed(clock_skew(&late, 5000)), Observed::Inconclusive);
    }

    #[test]
    fn a_forgotten_lock_is_safe_only_when_the_stale_write_was_refused() {
        let pause = Duration::from_secs(4);
        let mut refused = state(5, 4, 1);
        refused.fenced_rejections = 1;
        let fenced = duel(
            reply(429, Some("stale_token"), 4010),
            reply(200, None, 10),
            refused,
        );
        assert_eq!(
            observed(forgotten_lock(&fenced, "deleted", &Ok(()), pause)),
            Observed::Seen(Safe)
        );
        let redlock = duel(reply(200, None, 4010), reply(200, None, 10), state(5, 4, 2));
        assert_eq!(
            observed(forgotten_lock(&redlock, "node 3 restarted", &Ok(()), pause)),
            Observed::Seen(Oversells)
        );
        let still_there = Err("node 3 still answers after SIGKILL".to_owned());
        assert_eq!(
            observed(forgotten_lock(
                &redlock,
                "node 3 restarted",
                &still_there,
                pause
            )),
            Observed::Inconclusive
        );
    }

    fn recovered(next: Reply, lock: LockState) -> Recovery {
        Recovery {
            death: "instance a (pid 12) killed with SIGKILL".to_owned(),
            held: Some("announced from inside its section"),
            restarted: Some(34),
            next,
            window: Duration::from_secs(2),
            lock,
        }
    }

    #[test]
    fn recovery_tells_frees_from_deadlock_from_stuck() {
        let frees = recovered(reply(200, None, 1004), LockState::default());
        assert_eq!(observed(recovery(&frees)), Observed::Seen(Frees));

        let orphaned = LockState {
            held: true,
            holder: Some("1".to_owned()),
            ttl_ms: None,
            no_ttl: true,
        };
        let deadlock = recovered(reply(429, Some("wait_timed_out"), 2000), orphaned.clone());
        let judgement = recovery(&deadlock);
        assert_eq!(judgement.observed, Observed::Seen(Deadlock));
        assert!(judgement.evidence.contains("held with no TTL"));

        let late = recovered(reply(200, None, 2600), LockState::default());
        assert_eq!(observed(recovery(&late)), Observed::Stuck);

        let alive = Recovery {
            restarted: None,
            ..frees.clone()
        };
        assert_eq!(observed(recovery(&alive)), Observed::Inconclusive);
        let never_held = Recovery {
            held: None,
            ..recovered(reply(429, Some("wait_timed_out"), 2000), orphaned)
        };
        assert_eq!(observed(recovery(&never_held)), Observed::Inconclusive);
    }

    #[test]
    fn retry_storm_counts_sales_of_one_request_id() {
        let answers: BTreeMap<String, usize> = [("200 sold".to_owned(), 16)].into_iter().collect();
        let mut once = state(5, 4, 1);
        once.replays = 15;
        assert_eq!(
            observed(retry_storm(&answers, &ledger(once))),
            Observed::Seen(Safe)
        );
        assert_eq!(
            observed(retry_storm(&answers, &ledger(state(5, 3, 2)))),
            Observed::Seen(Oversells)
        );
        // One sale, but no retry ever met another attempt.
        assert_eq!(
            observed(retry_storm(&answers, &ledger(state(5, 4, 1)))),
            Observed::Inconclusive
        );
    }

    #[test]
    fn redis_restart_needs_a_503_while_down() {
        let down = reply(503, Some("store_unavailable"), 2);
        let back = Some(Duration::from_millis(300));
        assert_eq!(
            observed(redis_restart(&down, back)),
            Observed::Seen(Recovers)
        );
        assert_eq!(observed(redis_restart(&down, None)), Observed::Stuck);
        assert_eq!(
            observed(redis_restart(&reply(200, None, 2), back)),
            Observed::Inconclusive
        );
    }

    #[test]
    fn redlock_minority_and_majority_down() {
        let killed = Ok(());
        assert_eq!(
            observed(minority_down(&killed, &ledger(state(50, 0, 50)))),
            Observed::Seen(KeepsSelling)
        );
        assert_eq!(
            observed(minority_down(&killed, &ledger(state(50, 0, 52)))),
            Observed::Seen(Oversells)
        );
        assert_eq!(
            observed(minority_down(&killed, &ledger(state(50, 30, 20)))),
            Observed::Stuck
        );
        let alive = Err("node 4 still answers after SIGKILL".to_owned());
        assert_eq!(
            observed(minority_down(&alive, &ledger(state(50, 0, 50)))),
            Observed::Inconclusive
        );

        let busy = MajorityDown {
            fast: reply(429, Some("no_quorum"), 101),
            waited: reply(429, Some("no_quorum"), 500),
            selling_again_after: Some(Duration::from_millis(40)),
            ledger: ledger(state(5, 4, 1)),
        };
        assert_eq!(
            observed(majority_down(&killed, &busy)),
            Observed::Seen(Busy)
        );
        let sold_anyway = MajorityDown {
            fast: reply(200, None, 3),
            ..busy.clone()
        };
        assert_eq!(
            observed(majority_down(&killed, &sold_anyway)),
            Observed::Seen(KeepsSelling)
        );
        let never_back = MajorityDown {
            selling_again_after: None,
            ..busy.clone()
        };
        assert_eq!(
            observed(majority_down(&killed, &never_back)),
            Observed::Stuck
        );
        assert_eq!(
            observed(majority_down(&alive, &busy)),
            Observed::Inconclusive
        );
    }
}
