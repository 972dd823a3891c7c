//! The two judges of a cell side by side: the lab's own (from the ledger,
//! the answers and the overlap witness, written for its scenario) and the
//! history checker's (from what the cell's clients were told and the books
//! read after, knowing nothing of variants or claims). They look at
//! different evidence; on safety they must agree, and where they do not,
//! the cell fails and says which judge the evidence contradicts.

use std::time::Duration;

use super::{Observed, said_of};
use crate::history::{self, Recorder, Verdict};
use crate::said;
use crate::variants::Behaviour;
use crate::wire::Said;

/// Time the checker has for each SKU of a cell.
const PER_SKU: Duration = Duration::from_secs(30);

/// The history checker's word on a cell, and the two judges' disagreement,
/// in English and in Chinese.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecondOpinion {
    /// `linearizable (12 ops)`, `unsafe (12 ops): unit 5 was sold 2 times`, ...
    pub summary: Said,
    pub disagreement: Option<Said>,
}

/// Judges the history `recorder` holds and sets it beside `observed`.
pub fn second_opinion(recorder: &Recorder, observed: Observed) -> SecondOpinion {
    let histories = match recorder.histories() {
        Ok(histories) => histories,
        Err(bad) => {
            return SecondOpinion {
                summary: said!("unreadable history: {bad}", "历史无法读取:{bad}"),
                disagreement: Some(said!(
                    "the recorded history cannot be read: {bad}",
                    "记录下来的历史无法读取:{bad}"
                )),
            };
        }
    };
    let report = history::check(&histories, PER_SKU);
    let worst = report.worst();
    let ops: usize = report.skus.iter().map(|d| d.ops).sum();
    let why = report.worst_why_said();
    let summary = summary(worst, ops, &why);
    let disagreement = disagree(observed, worst, histories.is_empty());
    SecondOpinion {
        summary,
        disagreement,
    }
}

/// The checker's verdict in a few words: `linearizable (12 ops)`, or the
/// verdict, its count of operations and why.
pub(super) fn summary(worst: Verdict, ops: usize, why: &Said) -> Said {
    let verdict = Said {
        en: worst.as_str().to_owned(),
        zh: worst.as_zh().to_owned(),
    };
    match worst {
        Verdict::Linearizable => said_of!("{} ({ops} ops)", "{}({ops} 个操作)"; verdict),
        _ => said_of!("{} ({ops} ops): {}", "{}({ops} 个操作):{}"; verdict, why),
    }
}

/// Where the two verdicts cannot both be right, which one the evidence
/// contradicts.
pub(super) fn disagree(
    observed: Observed,
    history: Verdict,
    nothing_recorded: bool,
) -> Option<Said> {
    let saw_oversell = observed == Observed::Seen(Behaviour::Oversells);
    let saw = Said {
        en: observed.name().to_owned(),
        zh: observed.name_zh().to_owned(),
    };
    match (observed, history) {
        // The cell failed already: nothing to set beside it.
        (Observed::Error | Observed::Inconclusive, _) => None,
        _ if nothing_recorded => Some(said!(
            "no sale was recorded for the history checker: the cell's buyers bypassed \
             the recording client",
            "没有为历史检查器记录任何销售:这个单元格的买家绕过了负责记录的客户端"
        )),
        (_, Verdict::Undecided) => Some(said!(
            "the history checker could not decide in time",
            "历史检查器没能在限定时间内作出判定"
        )),
        (_, Verdict::Unsafe) if !saw_oversell => Some(said_of!(
            "the lab saw {}, but the clients' own answers fit no stock: the lab's judge \
             missed what they were told",
            "实验室看到的是「{}」,但客户端自己收到的应答与任何库存都对不上:\
             实验室的判定漏掉了它们被告知的内容";
            saw
        )),
        (_, Verdict::Linearizable | Verdict::NotLinearizable) if saw_oversell => Some(said!(
            "the lab saw an oversell, but every answer the clients were told fits one \
             stock: the lab's evidence is not in what anyone was told",
            "实验室看到了超卖,但客户端收到的每个应答都与同一份库存相符:\
             实验室的证据不在任何人被告知的内容里"
        )),
        (_, Verdict::NotLinearizable) if observed != Observed::Seen(Behaviour::LosesUnits) => {
            Some(said_of!(
                "the lab saw {}, but a buyer was told sold out while stock remained \
                 (under-selling no claim of this cell admits)",
                "实验室看到的是「{}」,但有买家在还有库存时被告知售罄\
                 (这个单元格的任何声明都不允许少卖)";
                saw
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_judges_must_agree_on_safety() {
        let safe = Observed::Seen(Behaviour::Safe);
        let over = Observed::Seen(Behaviour::Oversells);
        assert_eq!(disagree(safe, Verdict::Linearizable, false), None);
        assert_eq!(disagree(over, Verdict::Unsafe, false), None);
        assert!(
            disagree(safe, Verdict::Unsafe, false)
                .unwrap()
                .en
                .contains("lab's judge missed")
        );
        assert!(disagree(over, Verdict::Linearizable, false).is_some());
        assert!(disagree(safe, Verdict::NotLinearizable, false).is_some());
        assert!(disagree(safe, Verdict::Undecided, false).is_some());
        assert!(disagree(safe, Verdict::Linearizable, true).is_some());
        assert_eq!(disagree(Observed::Error, Verdict::Unsafe, false), None);
        let loses = Observed::Seen(Behaviour::LosesUnits);
        assert_eq!(disagree(loses, Verdict::NotLinearizable, false), None);
    }
}
