//! Judges of the scenarios that send many buyers and read the ledger:
//! `race`, `slow-business`, `retry-storm`.

use std::collections::BTreeMap;

use super::{Judgement, Ledger, Observed, check, decide};
use crate::variants::Behaviour;

/// `race`: a safe race needs both instances to have answered (a race on
/// one instance tests nothing of a distributed lock). Under-selling is
/// shown beside the verdict, with the variant's reason for it if it
/// claims one (`undersells`).
pub fn race(ledger: &Ledger, undersells: Option<&str>) -> Judgement {
    crowd(ledger, undersells, |answering| {
        check(answering.len() >= 2, || {
            format!("only {answering:?} answered: no race between instances")
        })
    })
}

/// `one-instance`: the race, every buyer on one instance (one process).
pub fn one_instance(ledger: &Ledger, undersells: Option<&str>) -> Judgement {
    crowd(ledger, undersells, |answering| {
        check(answering.len() == 1, || {
            format!("{answering:?} answered: not one process")
        })
    })
}

/// A crowd of buyers judged from the ledger, once `landed` says (from the
/// instances that answered) that the crowd came as the scenario meant.
fn crowd(
    ledger: &Ledger,
    undersells: Option<&str>,
    landed: impl FnOnce(&[&String]) -> Result<(), String>,
) -> Judgement {
    let answering = ledger.answering();
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
    let landed = landed(&answering);
    decide(
        landed,
        ledger,
        Ok(()),
        format!("{served}; {ledger}{unsold}"),
    )
}

/// `slow-business`: a safe cell needs the lease to have been renewed
/// while the work outlived it; for a lock with no lease (`lease_ms`
/// `None`: the database's), the sections held longer than the lease a
/// Redis lock would have had, one after the other.
pub fn slow_business(ledger: &Ledger, lease_ms: Option<u64>) -> Judgement {
    let landed = check(ledger.state.sold > 0, || "no buyer got through".to_owned());
    let earned = match lease_ms {
        None => check(ledger.state.renewals > 0, || {
            "no lease was renewed: the work never outlived one".to_owned()
        }),
        Some(lease) => check(ledger.sections >= 2 && ledger.longest_ms > lease, || {
            format!(
                "no lock was held past {lease} ms by two buyers in turn ({} sections, the longest {} ms)",
                ledger.sections, ledger.longest_ms
            )
        }),
    };
    decide(landed, ledger, earned, ledger.to_string())
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
