//! The two judges of a cell side by side: the lab's own (from the ledger,
//! the answers and the overlap witness, written for its scenario) and the
//! history checker's (from what the cell's clients were told and the books
//! read after, knowing nothing of variants or claims). They look at
//! different evidence; on safety they must agree, and where they do not,
//! the cell fails and says which judge the evidence contradicts.

use std::time::Duration;

use super::Observed;
use crate::history::{self, Recorder, Verdict};
use crate::variants::Behaviour;

/// Time the checker has for each SKU of a cell.
const PER_SKU: Duration = Duration::from_secs(30);

/// The history checker's word on a cell, and the two judges' disagreement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecondOpinion {
    /// `linearizable (12 ops)`, `unsafe: unit 5 was sold 2 times`, ...
    pub summary: String,
    pub disagreement: Option<String>,
}

/// Judges the history `recorder` holds and sets it beside `observed`.
pub fn second_opinion(recorder: &Recorder, observed: Observed) -> SecondOpinion {
    let histories = match recorder.histories() {
        Ok(histories) => histories,
        Err(bad) => {
            return SecondOpinion {
                summary: format!("unreadable history: {bad}"),
                disagreement: Some(format!("the recorded history cannot be read: {bad}")),
            };
        }
    };
    let report = history::check(&histories, PER_SKU);
    let worst = report.worst();
    let ops: usize = report.skus.iter().map(|d| d.ops).sum();
    let why = report.worst_why();
    let summary = match worst {
        Verdict::Linearizable => format!("linearizable ({ops} ops)"),
        other => format!("{} ({ops} ops): {why}", other.as_str()),
    };
    let disagreement = disagree(observed, worst, histories.is_empty());
    SecondOpinion {
        summary,
        disagreement,
    }
}

/// Where the two verdicts cannot both be right, which one the evidence
/// contradicts.
fn disagree(observed: Observed, history: Verdict, nothing_recorded: bool) -> Option<String> {
    let saw_oversell = observed == Observed::Seen(Behaviour::Oversells);
    match (observed, history) {
        // The cell failed already: nothing to set beside it.
        (Observed::Error | Observed::Inconclusive, _) => None,
        _ if nothing_recorded => Some(
            "no sale was recorded for the history checker: the cell's buyers bypassed \
             the recording client"
                .to_owned(),
        ),
        (_, Verdict::Undecided) => Some("the history checker could not decide in time".to_owned()),
        (_, Verdict::Unsafe) if !saw_oversell => Some(format!(
            "the lab saw {}, but the clients' own answers fit no stock: the lab's judge \
             missed what they were told",
            observed.name()
        )),
        (_, Verdict::Linearizable | Verdict::NotLinearizable) if saw_oversell => Some(
            "the lab saw an oversell, but every answer the clients were told fits one \
             stock: the lab's evidence is not in what anyone was told"
                .to_owned(),
        ),
        (_, Verdict::NotLinearizable) if observed != Observed::Seen(Behaviour::LosesUnits) => {
            Some(format!(
                "the lab saw {}, but a buyer was told sold out while stock remained \
                 (under-selling no claim of this cell admits)",
                observed.name()
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
