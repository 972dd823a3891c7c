//! Judges of a store that went away: Redis restarted empty, Redlock with a
//! minority or a majority of its nodes dead.

use std::time::Duration;

use super::{Check, Judgement, Ledger, Observed, Reply, said_of};
use crate::said;
use crate::variants::Behaviour;

/// `redis-restart`: the answer while Redis was down, and how long after it
/// came back a sale worked again (`None`: not within the bound).
pub fn redis_restart(down: &Reply, selling_again_after: Option<Duration>) -> Judgement {
    let again = match selling_again_after {
        Some(after) => {
            let after = after.as_secs_f64();
            said!(
                "selling again {after:.2} s after Redis came back",
                "Redis 回来 {after:.2} s 后重新开卖"
            )
        }
        None => said!(
            "not selling again after Redis came back",
            "Redis 回来后没有重新开卖"
        ),
    };
    let evidence = said_of!("while down: {}; {}", "停机期间:{};{}"; down.said(), again);
    if down.status != 503 {
        return Judgement::inconclusive(
            &said!(
                "Redis was stopped, yet no 503 came",
                "Redis 已停止,却没有收到 503"
            ),
            evidence,
        );
    }
    match selling_again_after {
        Some(_) => Judgement::seen(Behaviour::Recovers, evidence),
        None => Judgement::new(Observed::Stuck, evidence),
    }
}

/// `redlock-minority-down`: the race on three nodes of five.
pub fn minority_down(killed: &Check, ledger: &Ledger) -> Judgement {
    let evidence = said_of!(
        "nodes 4 and 5 of 5 killed, a majority is 3; {}",
        "5 个节点中的 4 号和 5 号被杀死,多数是 3 个;{}";
        ledger.said()
    );
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
    let again = match m.selling_again_after {
        Some(after) => {
            let after = after.as_secs_f64();
            said!(
                "selling again after {after:.2} s",
                "{after:.2} s 后重新开卖"
            )
        }
        None => said!("not selling again", "没有重新开卖"),
    };
    let oversold = m.ledger.state.oversold;
    let evidence = said_of!(
        "nodes 3, 4 and 5 of 5 killed: answered {} (wait_ms=0) and {} (wait_ms=500); nodes back empty, {}; oversold {oversold}",
        "5 个节点中的 3、4、5 号被杀死:应答 {}(wait_ms=0)和 {}(wait_ms=500);节点清空后回来,{};超卖 {oversold}";
        m.fast.said(),
        m.waited.said(),
        again
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
