//! Judge of a failover: a holder inside its section when its lock's store
//! fails over (a Redis master replaced by its replica, an etcd or
//! ZooKeeper leader killed), and a newcomer after it.

use super::{Check, Judgement, Ledger, Reply, check, decide};

/// What a failover cell saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failover {
    /// What died and what took over, for people.
    pub fault: String,
    /// Whether the fault landed where it matters (the holder held the lock
    /// when its store failed, and the store served again).
    pub landed: Check,
    pub holder: Reply,
    pub newcomer: Reply,
    /// The newcomer's answer came after the holder's: it waited for the
    /// lock the holder still had.
    pub newcomer_after_holder: bool,
    /// The holder asked `WAIT` for one replica after taking the lock.
    pub asked_replica: bool,
    pub ledger: Ledger,
}

/// `failover`, `failover-wait`: safe only when the lock survived the
/// failover (the newcomer waited for the holder, no two sections
/// overlapped) or, with `WAIT`, when the holder learned its lock had not
/// reached the replica and sold nothing.
pub fn failover(f: &Failover) -> Judgement {
    let evidence = format!(
        "{}; holder answered {}, the newcomer {}; {}",
        f.fault, f.holder, f.newcomer, f.ledger
    );
    let earned = if f.asked_replica {
        check(
            f.holder.refused("not_replicated") && f.newcomer.sold(),
            || {
                format!(
                    "the holder answered {} and the newcomer {}: WAIT did not turn the holder away",
                    f.holder.answer(),
                    f.newcomer.answer()
                )
            },
        )
    } else {
        check(
            f.holder.sold()
                && f.newcomer.sold()
                && f.newcomer_after_holder
                && f.ledger.overlaps == 0,
            || {
                format!(
                    "the holder answered {}, the newcomer {}{}: the lock was not shown to outlive the failover",
                    f.holder.answer(),
                    f.newcomer.answer(),
                    if f.newcomer_after_holder {
                        ""
                    } else {
                        " before the holder"
                    }
                )
            },
        )
    };
    decide(f.landed.clone(), &f.ledger, earned, evidence)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::lab::judge::Observed;
    use crate::variants::Behaviour;
    use crate::wire::StateSnapshot;

    fn reply(status: u16, reason: Option<&str>) -> Reply {
        Reply {
            status,
            reason: reason.map(str::to_owned),
            replayed: false,
            unknown: false,
            unit: None,
            took: Duration::from_millis(10),
        }
    }

    fn ledger(sold: i64, duplicates: i64) -> Ledger {
        Ledger {
            state: StateSnapshot {
                initial: 5,
                sold,
                remaining: 5 - sold + duplicates,
                oversold: duplicates,
                duplicates,
                ..StateSnapshot::default()
            },
            ..Ledger::default()
        }
    }

    fn cell() -> Failover {
        Failover {
            fault: "master killed".to_owned(),
            landed: Ok(()),
            holder: reply(200, None),
            newcomer: reply(200, None),
            newcomer_after_holder: true,
            asked_replica: false,
            ledger: ledger(2, 0),
        }
    }

    #[test]
    fn a_unit_sold_twice_oversells() {
        let f = Failover {
            newcomer_after_holder: false,
            ledger: ledger(2, 1),
            ..cell()
        };
        assert_eq!(failover(&f).observed, Observed::Seen(Behaviour::Oversells));
    }

    #[test]
    fn safe_only_when_the_newcomer_waited_for_the_holder() {
        assert_eq!(failover(&cell()).observed, Observed::Seen(Behaviour::Safe));
        let raced = Failover {
            newcomer_after_holder: false,
            ..cell()
        };
        assert_eq!(failover(&raced).observed, Observed::Inconclusive);
        let missed = Failover {
            landed: Err("the holder never entered its section".to_owned()),
            ..cell()
        };
        assert_eq!(failover(&missed).observed, Observed::Inconclusive);
    }

    #[test]
    fn with_wait_safe_only_when_the_holder_was_turned_away() {
        let waited = Failover {
            asked_replica: true,
            holder: reply(429, Some("not_replicated")),
            ledger: ledger(1, 0),
            ..cell()
        };
        assert_eq!(failover(&waited).observed, Observed::Seen(Behaviour::Safe));
        let ignored = Failover {
            asked_replica: true,
            ..cell()
        };
        assert_eq!(failover(&ignored).observed, Observed::Inconclusive);
    }
}
