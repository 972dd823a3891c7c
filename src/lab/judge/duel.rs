//! Judges of a duel: a holder struck inside its section on one instance,
//! a newcomer on the other (`pause-holder`, `lock-vanishes`, `clock-skew`,
//! a lock its store forgot).

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
