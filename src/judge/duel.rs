//! Judges of a duel: a holder struck inside its section on one instance,
//! a newcomer on the other (`pause-holder`, `lock-vanishes-early`,
//! `lock-vanishes`, `clock-skew`, a lock its store forgot).

use std::time::Duration;

use super::{Check, Judgement, Ledger, Reply, check, decide};

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
    pub(super) fn evidence(&self, before: &str) -> String {
        format!(
            "{before}holder answered {}, the newcomer {}; {}",
            self.holder, self.newcomer, self.ledger
        )
    }

    pub(super) fn entered(&self) -> Check {
        check(self.entered, || {
            "the holder never entered its section (no announcement within the timeout)".to_owned()
        })
    }

    /// The holder was frozen for (at least) `pause`.
    pub(super) fn frozen(&self, pause: Duration) -> Check {
        check(self.holder.took >= pause, || {
            format!(
                "the holder answered within {:.2} s: it was not frozen for {:.1} s",
                self.holder.took.as_secs_f64(),
                pause.as_secs_f64()
            )
        })
    }

    /// The holder's late write was refused by the store and counted.
    pub(super) fn stale_write_refused(&self) -> Check {
        check(
            self.holder.refused("stale_token") && self.ledger.state.fenced_rejections > 0,
            || {
                format!(
                    "the holder answered {}: no stale write was refused",
                    self.holder
                )
            },
        )
    }
}

/// `lock-vanishes-early`: the lock was deleted under its holder while it
/// worked, before its watchdog's next renewal. Safe only when the holder
/// learned it (`lock_lost`) or was refused (`stale_token`).
pub fn lock_vanishes_early(duel: &Duel, deleted: bool) -> Judgement {
    let landed = duel.entered().and_then(|()| vanished(deleted));
    let earned = check(
        duel.holder.refused("lock_lost") || duel.holder.refused("stale_token"),
        || format!("the holder answered {}: it never noticed", duel.holder),
    );
    decide(
        landed,
        &duel.ledger,
        earned,
        duel.evidence("lock deleted right after the holder entered its section; "),
    )
}

/// When `lock-vanishes` deleted the lock, as its play saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Deletion {
    /// Right after the holder entered its section: its lock does not renew,
    /// so nothing can notice the deletion before the write.
    AfterEntry,
    /// After the holder's watchdog renewed the lease (seen by the lab: the
    /// lock's TTL went back up), this long after the holder entered its
    /// section: its next renewal comes only after its write.
    AfterRenewal(Duration),
    /// The holder's lock renews, but no renewal was seen (why): the
    /// deletion was not made at the worst moment.
    NoRenewal(String),
}

/// `lock-vanishes`: the lock was deleted at the worst moment, after the
/// holder's last renewal before its write, and the newcomer was done
/// before that write (`before_write`: or why that is not known). A holder
/// that answered `lock_lost` was told by a renewal after the deletion:
/// the fault missed its moment. Safe only when the store refused the
/// holder's stale write.
pub fn lock_vanishes(
    duel: &Duel,
    deleted: bool,
    when: &Deletion,
    before_write: &Check,
) -> Judgement {
    let moment = match when {
        Deletion::AfterEntry => Ok(()),
        Deletion::AfterRenewal(_) => check(!duel.holder.refused("lock_lost"), || {
            "the holder answered 429 lock_lost: a renewal came between the deletion and its write, not the worst moment".to_owned()
        }),
        Deletion::NoRenewal(why) => Err(why.clone()),
    };
    let landed = duel
        .entered()
        .and_then(|()| vanished(deleted))
        .and(moment)
        .and(before_write.clone());
    let before = match when {
        Deletion::AfterEntry => {
            "lock deleted right after the holder entered its section (its lock does not renew); "
                .to_owned()
        }
        Deletion::AfterRenewal(at) => format!(
            "lock deleted after the holder's renewal at {} ms in its section; ",
            at.as_millis()
        ),
        Deletion::NoRenewal(_) => "lock deleted; ".to_owned(),
    };
    decide(
        landed,
        &duel.ledger,
        duel.stale_write_refused(),
        duel.evidence(&before),
    )
}

/// The lock was there to delete.
fn vanished(deleted: bool) -> Check {
    check(deleted, || {
        "the lock was not there to delete (the action answered deleted: false)".to_owned()
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::Observed;
    use crate::variants::Behaviour::*;
    use crate::wire::StateSnapshot;

    fn state(initial: i64, remaining: i64, sold: i64) -> StateSnapshot {
        StateSnapshot::counted(initial, remaining, sold)
    }

    fn reply(status: u16, reason: Option<&str>, took_ms: u64) -> Reply {
        Reply {
            status,
            reason: reason.map(str::to_owned),
            took: Duration::from_millis(took_ms),
            ..Reply::default()
        }
    }

    fn duel(holder: Reply, newcomer: Reply, state: StateSnapshot) -> Duel {
        Duel {
            entered: true,
            holder,
            newcomer,
            ledger: Ledger {
                state,
                ..Ledger::default()
            },
        }
    }

    fn observed(judgement: Judgement) -> Observed {
        judgement.observed
    }

    #[test]
    fn lock_vanishes_early_is_safe_only_when_the_holder_noticed() {
        let backed_off = duel(
            reply(429, Some("lock_lost"), 1000),
            reply(200, None, 5),
            state(5, 4, 1),
        );
        assert_eq!(
            observed(lock_vanishes_early(&backed_off, true)),
            Observed::Seen(Safe)
        );
        let fenced = duel(
            reply(429, Some("stale_token"), 1000),
            reply(200, None, 5),
            state(5, 4, 1),
        );
        assert_eq!(
            observed(lock_vanishes_early(&fenced, true)),
            Observed::Seen(Safe)
        );
        let token = duel(reply(200, None, 1000), reply(200, None, 5), state(5, 4, 2));
        assert_eq!(
            observed(lock_vanishes_early(&token, true)),
            Observed::Seen(Oversells)
        );
        // The newcomer found the lock held: the deletion did not happen.
        let unnoticed = duel(
            reply(200, None, 1000),
            reply(429, Some("lock_held"), 5),
            state(5, 4, 1),
        );
        assert_eq!(
            observed(lock_vanishes_early(&unnoticed, true)),
            Observed::Inconclusive
        );
        assert_eq!(
            observed(lock_vanishes_early(&backed_off, false)),
            Observed::Inconclusive
        );
    }

    const RENEWED: Deletion = Deletion::AfterRenewal(Duration::from_millis(2004));

    #[test]
    fn lock_vanishes_after_the_renewal_is_safe_only_when_the_stale_write_was_refused() {
        // watchdog: nothing noticed before the write; the unit sold twice.
        let watchdog = duel(reply(200, None, 3000), reply(200, None, 5), state(5, 4, 2));
        let judgement = lock_vanishes(&watchdog, true, &RENEWED, &Ok(()));
        assert_eq!(judgement.observed, Observed::Seen(Oversells));
        assert!(
            judgement
                .evidence
                .starts_with("lock deleted after the holder's renewal at 2004 ms in its section; "),
            "{}",
            judgement.evidence
        );
        // fenced: the store refused the holder's write.
        let mut refused = state(5, 4, 1);
        refused.fenced_rejections = 1;
        let fenced = duel(
            reply(429, Some("stale_token"), 3000),
            reply(200, None, 5),
            refused,
        );
        let judgement = lock_vanishes(&fenced, true, &RENEWED, &Ok(()));
        assert_eq!(judgement.observed, Observed::Seen(Safe));
        assert!(
            judgement
                .evidence
                .contains("holder answered 429 stale_token")
        );
        // A lock that does not renew: deleted right after the holder entered.
        let token = duel(reply(200, None, 3000), reply(200, None, 5), state(5, 4, 2));
        let judgement = lock_vanishes(&token, true, &Deletion::AfterEntry, &Ok(()));
        assert_eq!(judgement.observed, Observed::Seen(Oversells));
        assert!(judgement.evidence.contains("its lock does not renew"));
    }

    #[test]
    fn lock_vanishes_after_the_renewal_misses_its_moment_when_a_renewal_noticed() {
        // A renewal between the deletion and the write told the holder: the
        // early scenario's safety, not this one's.
        let backed_off = duel(
            reply(429, Some("lock_lost"), 3000),
            reply(200, None, 5),
            state(5, 4, 1),
        );
        let judgement = lock_vanishes(&backed_off, true, &RENEWED, &Ok(()));
        assert_eq!(judgement.observed, Observed::Inconclusive);
        assert!(
            judgement.evidence.contains("not the worst moment"),
            "{}",
            judgement.evidence
        );
        // No renewal seen before the deletion: whatever the ledger says.
        let watchdog = duel(reply(200, None, 3000), reply(200, None, 5), state(5, 4, 2));
        let unseen =
            Deletion::NoRenewal("no renewal of the holder's lock within 6000 ms".to_owned());
        let judgement = lock_vanishes(&watchdog, true, &unseen, &Ok(()));
        assert_eq!(judgement.observed, Observed::Inconclusive);
        assert!(
            judgement
                .evidence
                .contains("no renewal of the holder's lock")
        );
        // Safe by the ledger, but the holder was never refused: the newcomer
        // came after its write.
        let late = duel(reply(200, None, 3000), reply(200, None, 5), state(5, 3, 2));
        assert_eq!(
            observed(lock_vanishes(&late, true, &RENEWED, &Ok(()))),
            Observed::Inconclusive
        );
        assert_eq!(
            observed(lock_vanishes(&watchdog, false, &RENEWED, &Ok(()))),
            Observed::Inconclusive
        );
        // The newcomer was not surely done before the holder's write.
        let slow = Err("the newcomer answered 3120 ms after the holder was sent".to_owned());
        let judgement = lock_vanishes(&watchdog, true, &RENEWED, &slow);
        assert_eq!(judgement.observed, Observed::Inconclusive);
        assert!(judgement.evidence.contains("3120 ms"));
    }
}
