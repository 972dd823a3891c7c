//! The judge of buyers left in doubt: Redis stopped answering under them,
//! they were told `unknown`, and each asked again with its request id once
//! Redis answered (`redis-pause`); and what every judge of buyers in doubt
//! shares (`database` judges PostgreSQL's faults with it).

use std::collections::BTreeSet;
use std::time::Duration;

use super::{Check, Judgement, Ledger, Observed, Reply, said_of};
use crate::said;
use crate::variants::Behaviour;
use crate::wire::Said;

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

/// What the buyers' answers came to: the ids in doubt at first (told
/// `unknown`, or any answer but a final one), how they resolved, and
/// what they were told beside what the ledger recorded.
pub(super) struct Resolution<'a> {
    pub(super) in_doubt: usize,
    pub(super) unresolved: Vec<&'a str>,
    pub(super) told: i64,
    pub(super) units: usize,
    pub(super) recorded: i64,
    /// The numbers in words, for the evidence.
    pub(super) said: Said,
}

pub(super) fn resolve<'a>(
    buyers: &'a [Doubted],
    ledger: &Ledger,
    doubted: impl Fn(&Reply) -> bool,
) -> Resolution<'a> {
    let in_doubt: Vec<&Doubted> = buyers.iter().filter(|b| doubted(&b.first)).collect();
    let unresolved: Vec<&str> = buyers
        .iter()
        .filter(|b| b.resolved().is_none())
        .map(|b| b.id.as_str())
        .collect();
    let final_of_doubted = || in_doubt.iter().filter_map(|b| b.resolved());
    let replayed = final_of_doubted().filter(|r| r.replayed).count();
    let decided = final_of_doubted().filter(|r| !r.replayed).count();
    let told_sold: Vec<&Reply> = buyers
        .iter()
        .filter_map(Doubted::resolved)
        .filter(|r| r.sold())
        .collect();
    let units: BTreeSet<i64> = told_sold.iter().filter_map(|r| r.unit).collect();
    let told = told_sold.len() as i64;
    let recorded = ledger.state.sold;
    let example = match unresolved.first() {
        Some(id) => said!(" (e.g. {id})", "(例如 {id})"),
        None => Said::default(),
    };
    let (open, distinct) = (unresolved.len(), units.len());
    let (unknown, replays) = (ledger.state.unknown, ledger.state.replays);
    let said = said_of!(
        "on retry {replayed} replayed their record and {decided} were decided anew, {open} unresolved{}; \
         {told} told sold, {distinct} distinct units, {recorded} sales recorded \
         (the ledger counted {unknown} unknown, {replays} replays)",
        "重试时 {replayed} 个重放了自己的记录,{decided} 个被重新判定,{open} 个仍未解决{};\
         {told} 个被告知已售出,涉及 {distinct} 件不同的库存,记录了 {recorded} 笔销售\
         (账本计有 {unknown} 个结果未知、{replays} 次重放)";
        example
    );
    Resolution {
        in_doubt: in_doubt.len(),
        unresolved,
        told,
        units: units.len(),
        recorded,
        said,
    }
}

/// The verdict once the fault is known to have landed: the ledger's own,
/// a unit told to two buyers or a sale told and never recorded
/// (oversells), an id never resolved (stuck), a recorded sale nobody was
/// told of (loses units), or safe.
pub(super) fn decide(r: &Resolution<'_>, ledger: &Ledger, evidence: Said) -> Judgement {
    if let Some(failure) = ledger.failure() {
        return Judgement::new(failure, evidence);
    }
    if (r.units as i64) < r.told || r.told > r.recorded {
        return Judgement::seen(Behaviour::Oversells, evidence);
    }
    if !r.unresolved.is_empty() {
        return Judgement::new(Observed::Stuck, evidence);
    }
    if r.told < r.recorded {
        // Sales recorded that no buyer was ever told of: stock gone to nobody.
        return Judgement::seen(Behaviour::LosesUnits, evidence);
    }
    Judgement::seen(Behaviour::Safe, evidence)
}

/// Safe when calls were cut off (buyers told `unknown`) on both instances'
/// watch, every buyer's request id then resolved to a final answer (its
/// record replayed, or decided anew), no unit went to two buyers, and the
/// buyers told "sold" are exactly the sales the ledger recorded.
pub fn redis_pause(p: &RedisPause) -> Judgement {
    let r = resolve(&p.buyers, &p.ledger, |first| first.unknown);
    let answering = p.ledger.answering();
    let (pause, buyers, in_doubt) = (p.pause.as_secs_f64(), p.buyers.len(), r.in_doubt);
    let evidence = said_of!(
        "Redis paused {pause:.1} s mid-sale, {buyers} buyers with request ids: {in_doubt} answered unknown; {}; \
         answered by {answering:?}; {}",
        "销售进行中 Redis 暂停 {pause:.1} s,{buyers} 个带 request_id 的买家:{in_doubt} 个得到结果未知的应答;{};\
         由 {answering:?} 应答;{}";
        r.said,
        p.ledger.said()
    );
    if let Err(why) = &p.paused {
        return Judgement::inconclusive(why, evidence);
    }
    if r.in_doubt == 0 {
        return Judgement::inconclusive(
            &said!(
                "no call was cut off: no buyer answered unknown",
                "没有调用被切断:没有买家得到结果未知的应答"
            ),
            evidence,
        );
    }
    if answering.len() < 2 {
        return Judgement::inconclusive(
            &said!("only one instance answered", "只有一个实例应答"),
            evidence,
        );
    }
    decide(&r, &p.ledger, evidence)
}

#[cfg(test)]
pub(super) mod tests {
    use std::time::Duration;

    use super::*;
    use crate::variants::Behaviour::*;
    use crate::wire::StateSnapshot;

    /// An answer of `status` after `took_ms` (shared with `database`'s tests).
    pub(in crate::judge) fn reply(status: u16, took_ms: u64) -> Reply {
        Reply {
            status,
            took: Duration::from_millis(took_ms),
            ..Reply::default()
        }
    }

    pub(in crate::judge) fn observed(judgement: Judgement) -> Observed {
        judgement.observed
    }

    /// A `redis-pause` cell as it should go: 2 units sold before the pause, 6
    /// buyers told unknown; on retry 3 replay their sale (units 3-5) and 3 are
    /// told sold out; 5 sales recorded of 5, on both instances.
    fn paused_sale() -> RedisPause {
        let answer = |status: u16, unit: Option<i64>, replayed: bool| Reply {
            replayed,
            unit,
            ..reply(status, 5)
        };
        let unknown = Reply {
            unknown: true,
            ..reply(503, 1000)
        };
        let mut buyers: Vec<Doubted> = (1..=2)
            .map(|unit| Doubted {
                id: format!("p-{unit}"),
                first: answer(200, Some(unit), false),
                retries: Vec::new(),
            })
            .collect();
        for i in 3..=8 {
            let retry = match i {
                3..=5 => answer(200, Some(i), true),
                _ => answer(409, None, false),
            };
            buyers.push(Doubted {
                id: format!("p-{i}"),
                first: unknown.clone(),
                retries: vec![retry],
            });
        }
        let mut state = StateSnapshot::counted(5, 0, 5);
        state.per_instance = [("a".into(), 7), ("b".into(), 7)].into();
        RedisPause {
            pause: Duration::from_millis(2500),
            paused: Ok(()),
            buyers,
            ledger: Ledger {
                state,
                ..Ledger::default()
            },
        }
    }

    #[test]
    fn redis_pause_is_safe_when_every_id_resolves_to_its_own_unit() {
        let safe = redis_pause(&paused_sale());
        assert_eq!(safe.observed, Observed::Seen(Safe), "{}", safe.evidence);
        assert!(
            safe.evidence
                .en
                .contains("6 answered unknown; on retry 3 replayed their record and 3 were decided anew, 0 unresolved"),
            "{}",
            safe.evidence
        );

        // One unit told to two buyers, the ledger none the wiser.
        let mut twice = paused_sale();
        twice.buyers[3].retries[0].unit = Some(3);
        assert_eq!(observed(redis_pause(&twice)), Observed::Seen(Oversells));

        // A buyer told sold whose sale the ledger never recorded.
        let mut unrecorded = paused_sale();
        unrecorded.buyers[7].retries[0] = Reply {
            unit: Some(6),
            ..reply(200, 5)
        };
        assert_eq!(
            observed(redis_pause(&unrecorded)),
            Observed::Seen(Oversells)
        );

        // The ledger itself oversold.
        let mut oversold = paused_sale();
        oversold.ledger.state = StateSnapshot {
            per_instance: oversold.ledger.state.per_instance.clone(),
            ..StateSnapshot::counted(5, 0, 6)
        };
        assert_eq!(observed(redis_pause(&oversold)), Observed::Seen(Oversells));

        // An id still in doubt after its retries.
        let mut stuck = paused_sale();
        stuck.buyers[6].retries = vec![Reply {
            unknown: true,
            ..reply(503, 1000)
        }];
        let judgement = redis_pause(&stuck);
        assert_eq!(judgement.observed, Observed::Stuck);
        assert!(judgement.evidence.en.contains("1 unresolved (e.g. p-7)"));

        // A recorded sale its buyer was told was sold out: a unit gone to nobody.
        let mut lost = paused_sale();
        lost.buyers[4].retries[0] = reply(409, 5);
        assert_eq!(observed(redis_pause(&lost)), Observed::Seen(LosesUnits));
    }

    #[test]
    fn redis_pause_proves_nothing_unless_calls_were_cut_off_on_both_instances() {
        let mut kept_answering = paused_sale();
        kept_answering.paused = Err(said!(
            "Redis kept answering 5 s after DEBUG SLEEP",
            "DEBUG SLEEP 之后 5 s,Redis 仍在应答"
        ));
        assert_eq!(
            observed(redis_pause(&kept_answering)),
            Observed::Inconclusive
        );

        let mut none_in_doubt = paused_sale();
        for buyer in &mut none_in_doubt.buyers[2..] {
            buyer.first = buyer.retries.remove(0);
        }
        let judgement = redis_pause(&none_in_doubt);
        assert_eq!(judgement.observed, Observed::Inconclusive);
        assert!(judgement.evidence.en.starts_with("no call was cut off"));

        let mut one_instance = paused_sale();
        one_instance.ledger.state.per_instance = [("a".into(), 14), ("b".into(), 0)].into();
        assert_eq!(observed(redis_pause(&one_instance)), Observed::Inconclusive);
    }
}
