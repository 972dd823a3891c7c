//! Judges of the scenarios that send many buyers and read the ledger:
//! `race`, `slow-business`, `retry-storm`.

use std::collections::BTreeMap;

use super::{Check, Judgement, Ledger, Observed, Reply, check, decide, said_of};
use crate::said;
use crate::variants::{Behaviour, Reason};
use crate::wire::Said;

/// `race`: a safe race needs both instances to have answered (a race on
/// one instance tests nothing of a distributed lock). Under-selling is
/// shown beside the verdict, with the variant's reason for it if it
/// claims one (`undersells`).
pub fn race(ledger: &Ledger, undersells: Option<&Reason>) -> Judgement {
    crowd(ledger, undersells, |answering| {
        check(answering.len() >= 2, || {
            said!(
                "only {answering:?} answered: no race between instances",
                "只有 {answering:?} 应答:实例之间没有竞争"
            )
        })
    })
}

/// `one-instance`: the race, every buyer on one instance (one process).
pub fn one_instance(ledger: &Ledger, undersells: Option<&Reason>) -> Judgement {
    crowd(ledger, undersells, |answering| {
        check(answering.len() == 1, || {
            said!(
                "{answering:?} answered: not one process",
                "{answering:?} 应答:不是同一个进程"
            )
        })
    })
}

/// A crowd of buyers judged from the ledger, once `landed` says (from the
/// instances that answered) that the crowd came as the scenario meant.
fn crowd(
    ledger: &Ledger,
    undersells: Option<&Reason>,
    landed: impl FnOnce(&[&String]) -> Check,
) -> Judgement {
    let answering = ledger.answering();
    let served: Vec<Said> = (ledger.state.per_instance.iter())
        .map(|(name, n)| said!("{name} answered {n}", "{name} 应答 {n} 次"))
        .collect();
    let served = Said::join(&served, &said!(", ", ","));
    let s = &ledger.state;
    let unsold = if s.remaining > 0 && s.busy > 0 {
        let (remaining, busy) = (s.remaining, s.busy);
        let why = match undersells {
            Some(reason) => Said {
                en: reason.en.to_owned(),
                zh: reason.zh.to_owned(),
            },
            None => said!("not expected of this variant", "这个变体本不该如此"),
        };
        said_of!(
            "; unsold {remaining} while {busy} buyers were refused: {}",
            ";{busy} 个买家被拒绝时还有 {remaining} 件未售出:{}";
            why
        )
    } else {
        Said::default()
    };
    let landed = landed(&answering);
    decide(
        landed,
        ledger,
        Ok(()),
        said_of!("{}; {}{}", "{};{}{}"; served, ledger.said(), unsold),
    )
}

/// `slow-business`: a safe cell needs the lease to have been renewed
/// while the work outlived it; for a lock with no lease (`lease_ms`
/// `None`: the database's), the sections held longer than the lease a
/// Redis lock would have had, one after the other.
pub fn slow_business(ledger: &Ledger, lease_ms: Option<u64>) -> Judgement {
    let landed = check(ledger.state.sold > 0, || {
        said!("no buyer got through", "没有一个买家买到")
    });
    let earned = match lease_ms {
        None => check(ledger.state.renewals > 0, || {
            said!(
                "no lease was renewed: the work never outlived one",
                "没有租约被续约:业务处理从未超过一个租约"
            )
        }),
        Some(lease) => check(ledger.sections >= 2 && ledger.longest_ms > lease, || {
            let (sections, longest) = (ledger.sections, ledger.longest_ms);
            said!(
                "no lock was held past {lease} ms by two buyers in turn ({sections} sections, the longest {longest} ms)",
                "没有两个买家先后持有锁超过 {lease} ms({sections} 个临界区,最长 {longest} ms)"
            )
        }),
    };
    decide(landed, ledger, earned, ledger.said())
}

/// `retry-storm`: concurrent retries of one request id, and their answers
/// ("200 sold", "429 in_progress", ...), shown by count.
pub fn retry_storm(retries: &[Reply], ledger: &Ledger) -> Judgement {
    let s = &ledger.state;
    let (mut answers, mut answers_zh) = (BTreeMap::new(), BTreeMap::new());
    for retry in retries {
        let answer = retry.answer_said();
        *answers.entry(answer.en).or_insert(0_usize) += 1;
        *answers_zh.entry(answer.zh).or_insert(0_usize) += 1;
    }
    let in_progress = answers.get("429 in_progress").copied().unwrap_or(0);
    let (sold, replays) = (s.sold, s.replays);
    let evidence = Said {
        en: format!("sold {sold} (must be 1), replays {replays}, answers {answers:?}"),
        zh: format!("卖出 {sold}(必须是 1),重放 {replays},应答 {answers_zh:?}"),
    };
    if s.replays == 0 && in_progress == 0 && s.sold < 2 {
        return Judgement::inconclusive(
            &said!(
                "no retry met another attempt (no replay, no in_progress)",
                "没有一次重试遇上另一次尝试(没有重放,也没有 in_progress)"
            ),
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
