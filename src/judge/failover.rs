//! Judge of a failover: a holder inside its section when its lock's store
//! fails over (a Redis master replaced by its replica, an etcd or
//! ZooKeeper leader killed), and a newcomer after it.

use super::{Check, Judgement, Ledger, Reply, check, decide, said_of};
use crate::said;
use crate::variants::Behaviour;
use crate::wire::Said;

/// What the holder asked of replication, and when the lab held
/// replication back (a Redis failover).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replication {
    /// The holder asked nothing; replication was held back before it took
    /// its lock (`failover`; etcd and ZooKeeper, which replicate by
    /// consensus, ask nothing either).
    NotAsked,
    /// The holder asked `WAIT` for one replica after taking its lock;
    /// replication was held back before it, so `WAIT` sees none
    /// (`failover-wait-early`).
    HeldBeforeWait,
    /// The holder asked `WAIT` for one replica and its lock reached it;
    /// replication was held back only then, before the holder's write
    /// (`failover-wait`): the write is what the failover loses.
    HeldAfterWait,
}

/// What a failover cell saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failover {
    /// What died and what took over, for people.
    pub fault: Said,
    /// Whether the fault landed where it matters (the holder held the lock
    /// when its store failed, and the store served again).
    pub landed: Check,
    pub holder: Reply,
    pub newcomer: Reply,
    /// The newcomer's answer came after the holder's: it waited for the
    /// lock the holder still had.
    pub newcomer_after_holder: bool,
    pub replication: Replication,
    /// The ledger of the store that serves after the failover (a Redis
    /// failover rolls it back with the stock).
    pub ledger: Ledger,
}

/// `failover`, `failover-wait-early`, `failover-wait`: safe only when the
/// lock survived the failover (the newcomer waited for the holder, no two
/// sections overlapped); with `WAIT` held back before the lock, when the
/// holder learned its lock had not reached the replica and sold nothing;
/// with `WAIT` that saw the lock, when no unit was sold twice. A Redis
/// failover rolls the ledger back with the stock: the holder's sale is
/// gone from the new master's ledger, and only the two answers (both sold,
/// the same unit) show the unit sold twice.
pub fn failover(f: &Failover) -> Judgement {
    let evidence = said_of!(
        "{}; holder answered {}, the newcomer {}; {}",
        "{};持有者应答 {},新来者应答 {};{}";
        f.fault,
        f.holder.said(),
        f.newcomer.said(),
        f.ledger.said()
    );
    match f.replication {
        Replication::NotAsked => {
            let earned = check(
                f.holder.sold()
                    && f.newcomer.sold()
                    && f.newcomer_after_holder
                    && f.ledger.overlaps == 0,
                || {
                    let order = if f.newcomer_after_holder {
                        Said::default()
                    } else {
                        said!(" before the holder", "(先于持有者)")
                    };
                    said_of!(
                        "the holder answered {}, the newcomer {}{}: the lock was not shown to outlive the failover",
                        "持有者应答 {},新来者应答 {}{}:没有证据表明锁在故障转移后依然存在";
                        f.holder.answer_said(),
                        f.newcomer.answer_said(),
                        order
                    )
                },
            );
            decide(f.landed.clone(), &f.ledger, earned, evidence)
        }
        Replication::HeldBeforeWait => {
            let earned = check(
                f.holder.refused("not_replicated") && f.newcomer.sold(),
                || {
                    said_of!(
                        "the holder answered {} and the newcomer {}: WAIT did not turn the holder away",
                        "持有者应答 {},新来者应答 {}:WAIT 没有把持有者挡回去";
                        f.holder.answer_said(),
                        f.newcomer.answer_said()
                    )
                },
            );
            decide(f.landed.clone(), &f.ledger, earned, evidence)
        }
        Replication::HeldAfterWait => after_wait(f, evidence),
    }
}

/// `failover-wait`: the holder's lock reached the replica, its write did
/// not. Landed only when the holder sold (its `WAIT` saw the replica and
/// it wrote before the failover).
fn after_wait(f: &Failover, evidence: Said) -> Judgement {
    let landed = f.landed.clone().and_then(|()| {
        check(f.holder.sold(), || {
            said_of!(
                "the holder answered {}: it did not sell on the old master after WAIT saw the replica",
                "持有者应答 {}:WAIT 看到副本之后,它没有在旧主节点上卖出";
                f.holder.answer_said()
            )
        })
    });
    let twice = f.newcomer.sold() && f.holder.unit.is_some() && f.newcomer.unit == f.holder.unit;
    if let (Ok(()), true, Some(unit)) = (&landed, twice, f.holder.unit) {
        return Judgement::seen(
            Behaviour::Oversells,
            said_of!(
                "unit {unit} sold twice: the holder's sale on the old master was lost in the failover and the newcomer sold the unit again on the new one (the new master's ledger alone shows no oversell); {}",
                "第 {unit} 件被卖了两次:持有者在旧主节点上的这笔销售在故障转移中丢失,新来者又在新主节点上把这件卖了一次(只看新主节点的账本看不出超卖);{}";
                evidence
            ),
        );
    }
    let earned = check(f.newcomer.sold() && !twice, || {
        said_of!(
            "the newcomer answered {}: no second sale showed whether the holder's write survived",
            "新来者应答 {}:没有第二笔销售能说明持有者的写入是否保留了下来";
            f.newcomer.answer_said()
        )
    });
    decide(landed, &f.ledger, earned, evidence)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::judge::Observed;
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
            fault: said!("master killed", "主节点被杀死"),
            landed: Ok(()),
            holder: reply(200, None),
            newcomer: reply(200, None),
            newcomer_after_holder: true,
            replication: Replication::NotAsked,
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
            landed: Err(said!(
                "the holder never entered its section",
                "持有者从未进入临界区"
            )),
            ..cell()
        };
        assert_eq!(failover(&missed).observed, Observed::Inconclusive);
    }

    #[test]
    fn with_wait_safe_only_when_the_holder_was_turned_away() {
        let waited = Failover {
            replication: Replication::HeldBeforeWait,
            holder: reply(429, Some("not_replicated")),
            ledger: ledger(1, 0),
            ..cell()
        };
        assert_eq!(failover(&waited).observed, Observed::Seen(Behaviour::Safe));
        let ignored = Failover {
            replication: Replication::HeldBeforeWait,
            ..cell()
        };
        assert_eq!(failover(&ignored).observed, Observed::Inconclusive);
    }

    fn sold(unit: i64) -> Reply {
        Reply {
            unit: Some(unit),
            ..reply(200, None)
        }
    }

    /// `failover-wait`: the holder sold unit 5 on the old master, the
    /// failover rolled the ledger back, the newcomer sold unit 5 again.
    fn after_wait() -> Failover {
        Failover {
            replication: Replication::HeldAfterWait,
            holder: sold(5),
            newcomer: sold(5),
            ledger: ledger(1, 0),
            ..cell()
        }
    }

    #[test]
    fn after_wait_the_same_unit_sold_twice_oversells_though_the_ledger_is_clean() {
        let judgement = failover(&after_wait());
        assert_eq!(judgement.observed, Observed::Seen(Behaviour::Oversells));
        assert!(
            judgement.evidence.en.starts_with("unit 5 sold twice: "),
            "{}",
            judgement.evidence
        );
        assert!(
            judgement.evidence.en.contains("oversold 0, duplicates 0"),
            "{}",
            judgement.evidence
        );
    }

    #[test]
    fn after_wait_safe_only_when_the_newcomer_sold_another_unit() {
        // The holder's write survived: the newcomer sold the next unit.
        let survived = Failover {
            newcomer: sold(4),
            ledger: ledger(2, 0),
            ..after_wait()
        };
        assert_eq!(
            failover(&survived).observed,
            Observed::Seen(Behaviour::Safe)
        );
        // The newcomer sold nothing: nothing shows what the failover kept.
        let refused = Failover {
            newcomer: reply(429, Some("lock_held")),
            ..after_wait()
        };
        assert_eq!(failover(&refused).observed, Observed::Inconclusive);
    }

    #[test]
    fn after_wait_lands_only_when_the_holder_sold_after_its_wait() {
        // WAIT saw no replica: the hold came before the lock replicated.
        let early = Failover {
            holder: reply(429, Some("not_replicated")),
            ..after_wait()
        };
        let judgement = failover(&early);
        assert_eq!(judgement.observed, Observed::Inconclusive);
        assert!(
            judgement
                .evidence
                .en
                .contains("the holder answered 429 not_replicated"),
            "{}",
            judgement.evidence
        );
        let unseen = Failover {
            landed: Err(said!(
                "the holder's lock was not on the replica",
                "持有者的锁不在副本上"
            )),
            ..after_wait()
        };
        assert_eq!(failover(&unseen).observed, Observed::Inconclusive);
    }
}
