//! A schedule's second judge: the history checker, from what its buyers
//! were told and the books read after it, beside the explorer's own
//! verdict from the ledger. On safety they must agree; a schedule where
//! they do not fails the exploration and says which one the evidence
//! contradicts.

use std::time::Duration;

use crate::history::{self, Recorder, Verdict};
use crate::wire::Said;

/// Time the checker has for the schedule's SKU.
const PER_SKU: Duration = Duration::from_secs(30);

/// The checker's verdict in a few words, and the disagreement with the
/// ledger's `oversold` (a unit sold twice, or more than the stock), if
/// any; or with the cell's claim, where a buyer was told "sold out" while
/// stock remained and the claim (`undersells`: it admits losing units)
/// does not expect it.
pub(super) fn opinion(
    recorder: &Recorder,
    (oversold, undersells): (bool, bool),
) -> (Said, Option<Said>) {
    let histories = match recorder.histories() {
        Ok(histories) => histories,
        Err(bad) => {
            return (
                crate::said!("unreadable: {bad}", "无法读取:{bad}"),
                Some(crate::said!("{bad}", "{bad}")),
            );
        }
    };
    let report = history::check(&histories, PER_SKU);
    let worst = report.worst();
    let why = report.worst_why_said();
    let verdict = Said {
        en: worst.as_str().to_owned(),
        zh: worst.as_zh().to_owned(),
    };
    let summary = match worst {
        Verdict::Linearizable => verdict,
        _ => crate::said_of!("{}: {}", "{}:{}"; verdict, why),
    };
    let disagreement = match (worst, oversold) {
        (Verdict::Undecided, _) => Some(crate::said!(
            "the history checker could not decide in time",
            "历史检查器没能在限定时间内作出判定"
        )),
        (Verdict::Unsafe, false) => Some(crate::said_of!(
            "the ledger shows no unit sold twice, but the buyers' own answers fit no \
             stock ({}): the ledger's judge missed it",
            "账本上没有哪件被卖了两次,但买家自己收到的回答与任何库存都对不上({}):账本的判定漏掉了它";
            why
        )),
        (Verdict::NotLinearizable, false) if !undersells => Some(crate::said_of!(
            "a buyer was told sold out while stock remained ({}), which the cell's \
             claim does not admit: the ledger's judge does not look at what buyers were told",
            "还有库存时有买家被告知售罄({}),而这个格子的结论不允许这样:账本的判定不看买家被告知了什么";
            why
        )),
        (Verdict::Linearizable | Verdict::NotLinearizable, true) => Some(crate::said!(
            "the ledger shows a unit sold twice, but every answer fits one stock: \
             the ledger counted a sale no buyer was told of",
            "账本上有一件被卖了两次,但每个回答都与同一份库存相符:账本记下了一笔没有买家被告知的销售"
        )),
        _ if histories.is_empty() => Some(crate::said!(
            "nothing was recorded of the schedule",
            "这个调度什么也没有记录下来"
        )),
        _ => None,
    };
    (summary, disagreement)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Told;

    /// Two buyers told the same unit while the ledger saw nothing wrong:
    /// the ledger's judge missed it. The same history beside a ledger that
    /// saw the oversell: they agree. A silenced buyer's answer is no
    /// answer, which convicts nobody.
    #[test]
    fn the_judges_disagree_where_the_answers_fit_no_stock_and_the_ledger_saw_none() {
        let recorder = Recorder::new();
        recorder.declare("x", 2);
        for _ in 0..2 {
            let call = recorder.call("x");
            recorder.told(call, recorder.client(), None, Told::Sold(2));
        }
        let (summary, disagreement) = opinion(&recorder, (false, false));
        assert!(summary.en.starts_with("unsafe: "), "{summary}");
        assert!(
            disagreement
                .unwrap()
                .en
                .contains("the ledger's judge missed it"),
            "{summary}"
        );
        assert_eq!(opinion(&recorder, (true, false)).1, None);

        let silenced = Recorder::new();
        silenced.declare("x", 2);
        silenced.silence("schedule=run:B");
        assert!(silenced.silenced("/deductStock/token?sku=x&schedule=run:B"));
        assert!(!silenced.silenced("/deductStock/token?sku=x&schedule=run:A"));
        let call = silenced.call("x");
        silenced.told(call, silenced.client(), None, Told::Sold(2));
        let call = silenced.call("x");
        silenced.told(call, silenced.client(), None, Told::Nothing);
        let (summary, disagreement) = opinion(&silenced, (false, false));
        assert_eq!(
            (summary.en.as_str(), summary.zh.as_str()),
            ("linearizable", "可线性化")
        );
        assert_eq!(disagreement, None);
    }

    /// A buyer told sold out with a unit left: a disagreement unless the
    /// cell's claim admits losing units.
    #[test]
    fn a_sold_out_told_while_stock_remained_fails_a_claim_that_does_not_admit_it() {
        let recorder = Recorder::new();
        recorder.declare("x", 2);
        let call = recorder.call("x");
        recorder.told(call, recorder.client(), None, Told::Sold(2));
        let call = recorder.call("x");
        recorder.told(call, recorder.client(), None, Told::SoldOut);
        recorder.read("x", recorder.now(), 1);
        let (summary, disagreement) = opinion(&recorder, (false, false));
        assert!(summary.en.starts_with("not_linearizable: "), "{summary}");
        assert!(summary.zh.starts_with("不可线性化:"), "{}", summary.zh);
        assert!(
            disagreement
                .unwrap()
                .en
                .starts_with("a buyer was told sold out while stock remained"),
            "{summary}"
        );
        assert_eq!(opinion(&recorder, (false, true)).1, None);
    }
}
