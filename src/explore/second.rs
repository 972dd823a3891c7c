//! A schedule's second judge: the history checker, from what its buyers
//! were told and the books read after it, beside the explorer's own
//! verdict from the ledger. On safety they must agree; a schedule where
//! they do not fails the exploration and says which one the evidence
//! contradicts.

use std::time::Duration;

use crate::history::{self, Recorder, Verdict};

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
) -> (String, Option<String>) {
    let histories = match recorder.histories() {
        Ok(histories) => histories,
        Err(bad) => return (format!("unreadable: {bad}"), Some(format!("{bad}"))),
    };
    let report = history::check(&histories, PER_SKU);
    let worst = report.worst();
    let why = report.worst_why();
    let summary = match worst {
        Verdict::Linearizable => worst.as_str().to_owned(),
        _ => format!("{}: {why}", worst.as_str()),
    };
    let disagreement = match (worst, oversold) {
        (Verdict::Undecided, _) => Some("the history checker could not decide in time".to_owned()),
        (Verdict::Unsafe, false) => Some(format!(
            "the ledger shows no unit sold twice, but the buyers' own answers fit no \
             stock ({why}): the ledger's judge missed it"
        )),
        (Verdict::NotLinearizable, false) if !undersells => Some(format!(
            "a buyer was told sold out while stock remained ({why}), which the cell's \
             claim does not admit: the ledger's judge does not look at what buyers were told"
        )),
        (Verdict::Linearizable | Verdict::NotLinearizable, true) => Some(
            "the ledger shows a unit sold twice, but every answer fits one stock: \
             the ledger counted a sale no buyer was told of"
                .to_owned(),
        ),
        _ if histories.is_empty() => Some("nothing was recorded of the schedule".to_owned()),
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
        assert!(summary.starts_with("unsafe: "), "{summary}");
        assert!(
            disagreement
                .unwrap()
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
        assert_eq!(
            opinion(&silenced, (false, false)),
            ("linearizable".to_owned(), None)
        );
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
        assert!(summary.starts_with("not_linearizable: "), "{summary}");
        assert!(
            disagreement
                .unwrap()
                .starts_with("a buyer was told sold out while stock remained"),
            "{summary}"
        );
        assert_eq!(opinion(&recorder, (false, true)).1, None);
    }
}
