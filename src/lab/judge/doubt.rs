//! The judge of buyers left in doubt: Redis stopped answering under them,
//! they were told `unknown`, and each asked again with its request id once
//! Redis answered (`redis-pause`).

use std::collections::BTreeSet;
use std::time::Duration;

use super::{Check, Judgement, Ledger, Observed, Reply};
use crate::variants::Behaviour;

/// One buyer of `redis-pause`: its request id, its answer while Redis was
/// paused, and its retries once Redis answered again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Doubted {
    pub id: String,
    /// The answer to its first attempt, sent into the pause.
    pub first: Reply,
    /// Its retries with the same request id, until one was final.
    pub retries: Vec<Reply>,
}

impl Doubted {
    /// Its first final answer (sold or sold out), if it got one.
    pub fn resolved(&self) -> Option<&Reply> {
        std::iter::once(&self.first)
            .chain(&self.retries)
            .find(|reply| reply.is_final())
    }
}

/// What `redis-pause` saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisPause {
    /// How long Redis was paused (`DEBUG SLEEP`).
    pub pause: Duration,
    /// Redis seen not answering before the buyers came; why not, if it kept answering.
    pub paused: Check,
    pub buyers: Vec<Doubted>,
    /// The SKU's ledger once every retry was answered.
    pub ledger: Ledger,
}

/// Safe when calls were cut off (buyers told `unknown`) on both instances'
/// watch, every buyer's request id then resolved to a final answer (its
/// record replayed, or decided anew), no unit went to two buyers, and the
/// buyers told "sold" are exactly the sales the ledger recorded.
pub fn redis_pause(p: &RedisPause) -> Judgement {
    let in_doubt: Vec<&Doubted> = p.buyers.iter().filter(|b| b.first.unknown).collect();
    let unresolved: Vec<&str> = p
        .buyers
        .iter()
        .filter(|b| b.resolved().is_none())
        .map(|b| b.id.as_str())
        .collect();
    let replayed = in_doubt
        .iter()
        .filter_map(|b| b.resolved())
        .filter(|r| r.replayed)
        .count();
    let decided = in_doubt
        .iter()
        .filter_map(|b| b.resolved())
        .filter(|r| !r.replayed)
        .count();
    let told_sold: Vec<&Reply> = p
        .buyers
        .iter()
        .filter_map(Doubted::resolved)
        .filter(|r| r.sold())
        .collect();
    let units: BTreeSet<i64> = told_sold.iter().filter_map(|r| r.unit).collect();
    let told = told_sold.len() as i64;
    let recorded = p.ledger.state.sold;
    let answering: Vec<&String> = p
        .ledger
        .state
        .per_instance
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(name, _)| name)
        .collect();
    let evidence = format!(
        "Redis paused {:.1} s mid-sale, {} buyers with request ids: {} answered unknown; \
         on retry {replayed} replayed their record and {decided} were decided anew, {} unresolved{}; \
         {told} told sold, {} distinct units, {recorded} sales recorded \
         (the ledger counted {} unknown, {} replays); answered by {answering:?}; {}",
        p.pause.as_secs_f64(),
        p.buyers.len(),
        in_doubt.len(),
        unresolved.len(),
        match unresolved.first() {
            Some(id) => format!(" (e.g. {id})"),
            None => String::new(),
        },
        units.len(),
        p.ledger.state.unknown,
        p.ledger.state.replays,
        p.ledger,
    );
    if let Err(why) = &p.paused {
        return Judgement::inconclusive(why, evidence);
    }
    if in_doubt.is_empty() {
        return Judgement::inconclusive("no call was cut off: no buyer answered unknown", evidence);
    }
    if answering.len() < 2 {
        return Judgement::inconclusive("only one instance answered", evidence);
    }
    if let Some(failure) = p.ledger.failure() {
        return Judgement::new(failure, evidence);
    }
    if (units.len() as i64) < told || told > recorded {
        // A unit told to two buyers, or a buyer told sold with no sale recorded.
        return Judgement::seen(Behaviour::Oversells, evidence);
    }
    if !unresolved.is_empty() {
        return Judgement::new(Observed::Stuck, evidence);
    }
    if told < recorded {
        // Sales recorded that no buyer was ever told of: stock gone to nobody.
        return Judgement::seen(Behaviour::LosesUnits, evidence);
    }
    Judgement::seen(Behaviour::Safe, evidence)
}
