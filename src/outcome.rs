//! What one attempt to buy ends as ([`Outcome`], with a [`BusyReason`] when
//! busy) and the [`Answer`] a variant hands back.
//!
//! Below both the critical section ([`crate::section`], which decides them)
//! and the ledger (which records them and replays them to retries), so that
//! neither has to import the other's types.

/// What one attempt to buy ended as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Unit `unit` was sold; `remaining` is what the section wrote back.
    Sold { unit: i64, remaining: i64 },
    /// The stock read was `remaining` (zero, or below zero after an oversell).
    SoldOut { remaining: i64 },
    /// The section did not run, or stopped before its write. Nothing was sold.
    Busy(BusyReason),
    /// The write was sent and no answer came (a timeout, a dropped
    /// connection): it may or may not have happened. Only the ledger knows,
    /// and a retry with the same `request_id` learns it.
    Unknown,
    /// The SKU was never stocked (no reset ever gave it stock, or Redis lost it).
    NotStocked,
}

impl Outcome {
    /// How a final outcome is kept for idempotent retries: `sold:UNIT:REMAINING`,
    /// `sold_out:REMAINING`. Nothing else is final.
    pub fn encode(&self) -> Option<String> {
        match self {
            Outcome::Sold { unit, remaining } => Some(format!("sold:{unit}:{remaining}")),
            Outcome::SoldOut { remaining } => Some(format!("sold_out:{remaining}")),
            Outcome::Busy(_) | Outcome::Unknown | Outcome::NotStocked => None,
        }
    }

    pub fn decode(text: &str) -> Option<Outcome> {
        let mut parts = text.split(':');
        match (parts.next()?, parts.next(), parts.next()) {
            ("sold", Some(unit), Some(remaining)) => Some(Outcome::Sold {
                unit: unit.parse().ok()?,
                remaining: remaining.parse().ok()?,
            }),
            ("sold_out", Some(remaining), None) => Some(Outcome::SoldOut {
                remaining: remaining.parse().ok()?,
            }),
            _ => None,
        }
    }

    /// The short name used in metrics, the witness and the wire.
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Sold { .. } => "sold",
            Outcome::SoldOut { .. } => "sold_out",
            Outcome::Busy(_) => "busy",
            Outcome::Unknown => "unknown",
            Outcome::NotStocked => "not_stocked",
        }
    }
}

/// Why a request came back busy. Busy always means nothing was sold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BusyReason {
    /// The lock was held and the request was told not to wait (`wait_ms=0`).
    LockHeld,
    /// The lock was held for longer than `wait_ms`.
    WaitTimedOut,
    /// The holder learned that its lease was lost before it wrote, and backed off.
    LockLost,
    /// The store refused the holder's fencing token: a newer holder has been
    /// seen, so this one's lock is gone whatever it believes.
    StaleToken,
    /// Another attempt with the same `request_id` holds its claim right now.
    InProgress,
    /// The request's id is new and its SKU remembers as many ids as it may
    /// (`--request-ids-per-sku`): retry without an id, or later.
    RequestIdsFull,
    /// The lock store has no majority to serve (fewer than a majority of
    /// Redlock's nodes answered; etcd or ZooKeeper without a quorum, or
    /// unreachable): nobody can take the lock until they come back.
    NoQuorum,
    /// The lock was taken on the master, but fewer replicas than asked
    /// (`replicas`) acknowledged it within 100 ms: a failover now could
    /// lose it, so it was released and nothing was sold.
    NotReplicated,
    /// The SKU was reset between this request's read and its write: the
    /// write was refused, so no sale of the old stock lands in the new ledger.
    Reset,
    /// The stock row's version moved between the request's read and its
    /// write every time it tried (`pg-optimistic`): nothing was sold.
    VersionConflict,
}

impl BusyReason {
    pub fn as_str(self) -> &'static str {
        match self {
            BusyReason::LockHeld => "lock_held",
            BusyReason::WaitTimedOut => "wait_timed_out",
            BusyReason::LockLost => "lock_lost",
            BusyReason::StaleToken => "stale_token",
            BusyReason::InProgress => "in_progress",
            BusyReason::RequestIdsFull => "request_ids_full",
            BusyReason::NoQuorum => "no_quorum",
            BusyReason::Reset => "reset",
            BusyReason::NotReplicated => "not_replicated",
            BusyReason::VersionConflict => "version_conflict",
        }
    }
}

/// One attempt's answer, as the variant hands it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub outcome: Outcome,
    /// A retry answered from its request id's record: the first answer
    /// repeated, nothing sold by this attempt.
    pub replayed: bool,
    /// The ledger has counted this answer already (inside the script that
    /// decided it). Answers decided outside any script (the lock was not
    /// had) are counted by the caller.
    pub recorded: bool,
    /// The critical section as the timeline keeps it, recorded once the
    /// variant has released its lock.
    /// Boxed: a section is several times the size of the rest.
    pub witnessed: Option<Box<crate::timeline::Section>>,
    /// A sale that became an order: the token its buyer pays it with.
    pub order_token: Option<String>,
}

impl Answer {
    /// An answer no script has counted yet.
    pub fn unrecorded(outcome: Outcome) -> Self {
        Self {
            outcome,
            replayed: false,
            recorded: false,
            witnessed: None,
            order_token: None,
        }
    }

    /// The same answer, its section marked with the watchdog's renewals
    /// (instants of this process, placed on the timeline's clock).
    pub fn renewed_at(mut self, renewals: &[std::time::Instant]) -> Self {
        if let Some(section) = &mut self.witnessed {
            let (now, now_ns) = (std::time::Instant::now(), crate::timeline::now_ns());
            section.renewals_ns = renewals
                .iter()
                .map(|at| {
                    now_ns.saturating_sub(now.saturating_duration_since(*at).as_nanos() as u64)
                })
                .collect();
        }
        self
    }

    /// An answer the script that decided it also counted.
    pub fn recorded(outcome: Outcome, replayed: bool) -> Self {
        Self {
            outcome,
            replayed,
            recorded: true,
            witnessed: None,
            order_token: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The metrics start every outcome's series at zero, and every lock
    /// variant's contention reasons: they must be the names used.
    #[test]
    fn the_metrics_know_every_outcome_and_the_contention_reasons() {
        let every = [
            Outcome::Sold {
                unit: 1,
                remaining: 0,
            },
            Outcome::SoldOut { remaining: 0 },
            Outcome::Busy(BusyReason::LockHeld),
            Outcome::Unknown,
            Outcome::NotStocked,
        ];
        for outcome in every {
            // Exhaustive: a new outcome must be added above.
            match outcome {
                Outcome::Sold { .. }
                | Outcome::SoldOut { .. }
                | Outcome::Busy(_)
                | Outcome::Unknown
                | Outcome::NotStocked => {}
            }
            assert!(
                crate::metrics::ANSWER_OUTCOMES.contains(&outcome.kind()),
                "{outcome:?}"
            );
        }
        assert_eq!(
            crate::metrics::CONTENTION_REASONS,
            [
                BusyReason::LockHeld.as_str(),
                BusyReason::WaitTimedOut.as_str()
            ]
        );
    }

    #[test]
    fn final_outcomes_round_trip_and_nothing_else_is_kept() {
        for outcome in [
            Outcome::Sold {
                unit: 7,
                remaining: 6,
            },
            Outcome::SoldOut { remaining: -2 },
        ] {
            assert_eq!(Outcome::decode(&outcome.encode().unwrap()), Some(outcome));
        }
        for outcome in [
            Outcome::Busy(BusyReason::LockLost),
            Outcome::Unknown,
            Outcome::NotStocked,
        ] {
            assert_eq!(outcome.encode(), None);
        }
        assert_eq!(Outcome::decode("pending:abc:123"), None);
    }
}
