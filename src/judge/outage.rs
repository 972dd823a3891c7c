//! Judges of a store that went away: Redis restarted empty, Redlock with a
//! minority or a majority of its nodes dead.

use std::time::Duration;

use super::{Check, Judgement, Ledger, Observed, Reply};
use crate::variants::Behaviour;

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
