//! Judges of a duel: a holder struck inside its section on one instance,
//! a newcomer on the other (`pause-holder`, `lock-vanishes-early`,
//! `lock-vanishes`, `clock-skew`, a lock its store forgot).

use std::time::Duration;

use super::{Check, Judgement, Ledger, Reply, check, decide, said_of};
use crate::said;
use crate::wire::Said;

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
    pub(super) fn evidence(&self, before: &Said) -> Said {
        said_of!(
            "{}holder answered {}, the newcomer {}; {}",
            "{}持有者应答 {},新来者应答 {};{}";
            before,
            self.holder.said(),
            self.newcomer.said(),
            self.ledger.said()
        )
    }

    pub(super) fn entered(&self) -> Check {
        check(self.entered, || {
            said!(
                "the holder never entered its section (no announcement within the timeout)",
                "持有者从未进入临界区(超时之前没有收到进入的通知)"
            )
        })
    }

    /// The holder was frozen for (at least) `pause`.
    pub(super) fn frozen(&self, pause: Duration) -> Check {
        check(self.holder.took >= pause, || {
            let (took, pause) = (self.holder.took.as_secs_f64(), pause.as_secs_f64());
            said!(
                "the holder answered within {took:.2} s: it was not frozen for {pause:.1} s",
                "持有者在 {took:.2} s 内就应答了:它没有被冻结 {pause:.1} s"
            )
        })
    }

    /// The holder's late write was refused by the store and counted.
    pub(super) fn stale_write_refused(&self) -> Check {
        check(
            self.holder.refused("stale_token") && self.ledger.state.fenced_rejections > 0,
            || {
                said_of!(
                    "the holder answered {}: no stale write was refused",
                    "持有者应答 {}:没有过期写入被拒绝";
                    self.holder.said()
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
        || {
            said_of!(
                "the holder answered {}: it never noticed",
                "持有者应答 {}:它始终没有察觉";
                duel.holder.said()
            )
        },
    );
    decide(
        landed,
        &duel.ledger,
        earned,
        duel.evidence(&said!(
            "lock deleted right after the holder entered its section; ",
            "持有者刚进入临界区,锁就被删除;"
        )),
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
    NoRenewal(Said),
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
            said!(
                "the holder answered 429 lock_lost: a renewal came between the deletion and its write, not the worst moment",
                "持有者应答 429 lock_lost:在删除与写入之间有一次续约,不是最坏的时机"
            )
        }),
        Deletion::NoRenewal(why) => Err(why.clone()),
    };
    let landed = duel
        .entered()
        .and_then(|()| vanished(deleted))
        .and(moment)
        .and(before_write.clone());
    let before = match when {
        Deletion::AfterEntry => said!(
            "lock deleted right after the holder entered its section (its lock does not renew); ",
            "持有者刚进入临界区,锁就被删除(它的锁不续约);"
        ),
        Deletion::AfterRenewal(at) => {
            let at = at.as_millis();
            said!(
                "lock deleted after the holder's renewal at {at} ms in its section; ",
                "持有者在临界区内第 {at} ms 续约之后,锁被删除;"
            )
        }
        Deletion::NoRenewal(_) => said!("lock deleted; ", "锁被删除;"),
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
        said!(
            "the lock was not there to delete (the action answered deleted: false)",
            "没有锁可删(该操作的应答表明锁并不存在)"
        )
    })
}

/// `clock-skew`: the newcomer's instance runs `skew_ms` ahead (as it
/// answered the action). Safe only when that instance was refused while
/// the holder held the lock.
pub fn clock_skew(duel: &Duel, skew_ms: i64) -> Judgement {
    let landed = check(skew_ms > 0, || {
        said!(
            "the newcomer's clock was not skewed (it runs {skew_ms} ms ahead)",
            "新来者的时钟没有被调快(它快了 {skew_ms} ms)"
        )
    })
    .and_then(|()| duel.entered());
    let earned = check(duel.newcomer.refused("lock_held"), || {
        said_of!(
            "the skewed instance answered {}, not refused while the lock was held",
            "时钟被调快的实例应答 {},锁被持有期间它没有被拒绝";
            duel.newcomer.said()
        )
    });
    decide(
        landed,
        &duel.ledger,
        earned,
        duel.evidence(&said!(
            "the newcomer's clock {skew_ms} ms ahead; ",
            "新来者的时钟快了 {skew_ms} ms;"
        )),
    )
}

/// `redlock-restart-without-persistence`: the store forgot the lock of a
/// holder frozen for `pause` (`story`: how; `forgotten`: or why it did
/// not). Safe only when the holder's late write was refused.
pub fn forgotten_lock(duel: &Duel, story: &Said, forgotten: &Check, pause: Duration) -> Judgement {
    let landed = duel
        .entered()
        .and_then(|()| forgotten.clone())
        .and_then(|()| duel.frozen(pause));
    decide(
        landed,
        &duel.ledger,
        duel.stale_write_refused(),
        duel.evidence(&said_of!("{}; ", "{};"; story)),
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
                .en
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
                .en
                .contains("holder answered 429 stale_token")
        );
        // A lock that does not renew: deleted right after the holder entered.
        let token = duel(reply(200, None, 3000), reply(200, None, 5), state(5, 4, 2));
        let judgement = lock_vanishes(&token, true, &Deletion::AfterEntry, &Ok(()));
        assert_eq!(judgement.observed, Observed::Seen(Oversells));
        assert!(judgement.evidence.en.contains("its lock does not renew"));
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
            judgement.evidence.en.contains("not the worst moment"),
            "{}",
            judgement.evidence
        );
        // No renewal seen before the deletion: whatever the ledger says.
        let watchdog = duel(reply(200, None, 3000), reply(200, None, 5), state(5, 4, 2));
        let unseen = Deletion::NoRenewal(said!(
            "no renewal of the holder's lock within 6000 ms",
            "6000 ms 内持有者的锁没有续约"
        ));
        let judgement = lock_vanishes(&watchdog, true, &unseen, &Ok(()));
        assert_eq!(judgement.observed, Observed::Inconclusive);
        assert!(
            judgement
                .evidence
                .en
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
        let slow = Err(said!(
            "the newcomer answered 3120 ms after the holder was sent",
            "新来者在持有者发出请求 3120 ms 之后才应答"
        ));
        let judgement = lock_vanishes(&watchdog, true, &RENEWED, &slow);
        assert_eq!(judgement.observed, Observed::Inconclusive);
        assert!(judgement.evidence.en.contains("3120 ms"));
    }
}
