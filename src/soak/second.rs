//! The second judge of every round: the history checker
//! ([`crate::history`]), which reads only what the round's buyers were
//! told (recorded on their side, with the books read after) and knows
//! nothing of variants or claims. It is set beside the soak's own judge
//! ([`super::judge`]): on safety the two must agree, and a round where
//! they do not is a violation that says which judge the evidence
//! contradicts. `--history FILE` keeps every round's history.

use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context;

use super::judge::Counted;
use crate::history::{self, Outcome, Recorder, Verdict};
use crate::wire::HistoryJudgement;

/// Time the checker has for a round (one SKU).
pub const PER_ROUND: Duration = Duration::from_secs(30);

/// The history checker's verdict of the round `recorder` holds (`attempts`
/// sent by its buyers), and where it disagrees with the soak's judge
/// (`counted`). Decided off the load's threads.
pub async fn judge(recorder: &Recorder, attempts: usize, counted: &Counted) -> HistoryJudgement {
    let histories = match recorder.histories() {
        Ok(histories) => histories,
        Err(bad) => {
            return HistoryJudgement {
                verdict: Verdict::Undecided.as_str().to_owned(),
                why: format!("the recorded history cannot be read: {bad}"),
                ops: 0,
                elapsed_ms: 0,
                disagreement: Some(format!(
                    "the round's recorded history cannot be read ({bad}): the history \
                     checker could not judge it"
                )),
            };
        }
    };
    let recorded = histories
        .iter()
        .flat_map(|h| &h.ops)
        .filter(|op| op.outcome != Outcome::Read)
        .count();
    let ops = histories.iter().map(|h| h.ops.len()).sum();
    let checking = tokio::task::spawn_blocking(move || history::check(&histories, PER_ROUND));
    let report = match checking.await {
        Ok(report) => report,
        Err(err) => {
            return HistoryJudgement {
                verdict: Verdict::Undecided.as_str().to_owned(),
                why: format!("the checker failed: {err}"),
                ops,
                elapsed_ms: 0,
                disagreement: Some(format!("the history checker failed: {err}")),
            };
        }
    };
    let worst = report.worst();
    let why = report.worst_why();
    let bypassed = (attempts > 0 && recorded == 0) || recorder.undeclared() > 0;
    HistoryJudgement {
        verdict: worst.as_str().to_owned(),
        disagreement: disagree(counted, worst, &why, bypassed),
        why,
        ops,
        elapsed_ms: report.elapsed_ms,
    }
}

/// Where the soak's judge (`counted`) and the history checker (`history`,
/// because `why`) cannot both be right on the round's safety: which one
/// the evidence contradicts. `bypassed`: the buyers' attempts are not all
/// in the history (sent around the recording client, or to a SKU its
/// reset did not declare).
pub fn disagree(counted: &Counted, history: Verdict, why: &str, bypassed: bool) -> Option<String> {
    if bypassed {
        return Some(
            "the buyers' attempts are not in the recorded history (sent around the \
             round's recording client, or before its reset declared the SKU): the \
             history checker cannot judge the round"
                .to_owned(),
        );
    }
    match (history, &counted.unsafe_seen) {
        (Verdict::Undecided, _) => Some(format!(
            "the history checker could not decide the round within {} s: the soak's \
             judge stands unconfirmed",
            PER_ROUND.as_secs()
        )),
        // Redis lost the ledger (no --persist): the books read after
        // cannot fit the answers told before, and the soak's judge knows
        // why (LEDGER_LOST).
        (Verdict::Unsafe, None) if counted.data_lost => None,
        (Verdict::Unsafe, None) => Some(format!(
            "THE TWO JUDGES DISAGREE: the history checker finds the buyers' own answers \
             fit no stock ({why}), but the soak's judge saw nothing unsafe in the ledger: \
             the evidence contradicts the soak's judge"
        )),
        (Verdict::Linearizable | Verdict::NotLinearizable, Some(seen)) => Some(format!(
            "THE TWO JUDGES DISAGREE: the soak's judge saw {seen}, but every answer the \
             buyers were told, and the books read after, fit one stock: the evidence the \
             soak's judge read contradicts the history checker (an oversell no buyer was \
             told of, or a ledger that counted what did not happen)"
        )),
        _ => None,
    }
}

/// `--history FILE`: every judged round's history, appended as it is
/// judged (the file is created empty when the soak starts).
pub struct HistoryFile {
    file: Option<Mutex<std::fs::File>>,
}

impl HistoryFile {
    /// The file at `path` (none: nothing is written), created empty now.
    pub fn create(path: Option<&Path>) -> anyhow::Result<HistoryFile> {
        let file = match path {
            Some(path) => Some(Mutex::new(
                std::fs::File::create(path)
                    .with_context(|| format!("cannot write {}", path.display()))?,
            )),
            None => None,
        };
        Ok(HistoryFile { file })
    }

    /// Appends one round's history (its lines); a failed write is said,
    /// once a round.
    pub fn append(&self, lines: &[String]) {
        if let Some(file) = &self.file {
            let mut text = lines.join("\n");
            text.push('\n');
            let mut file = file.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(err) = file.write_all(text.as_bytes()) {
                eprintln!("soak: cannot write the history: {err}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counted(unsafe_seen: Option<&str>, data_lost: bool) -> Counted {
        Counted {
            unsafe_seen: unsafe_seen.map(str::to_owned),
            data_lost,
            ..Counted::default()
        }
    }

    #[test]
    fn the_two_judges_must_agree_on_safety_and_the_disagreement_names_the_judge() {
        let safe = counted(None, false);
        let oversold = counted(Some("oversold 1, 1 units sold twice (the ledger)"), false);
        assert_eq!(disagree(&safe, Verdict::Linearizable, "", false), None);
        assert_eq!(disagree(&oversold, Verdict::Unsafe, "", false), None);
        // Under-selling is counted, not a disagreement on safety.
        assert_eq!(disagree(&safe, Verdict::NotLinearizable, "", false), None);
        let missed = disagree(&safe, Verdict::Unsafe, "unit 3 was sold 2 times", false).unwrap();
        assert!(missed.contains("unit 3 was sold 2 times"), "{missed}");
        assert!(missed.contains("contradicts the soak's judge"), "{missed}");
        let unseen = disagree(&oversold, Verdict::Linearizable, "", false).unwrap();
        assert!(unseen.contains("oversold 1"), "{unseen}");
        assert!(
            unseen.contains("contradicts the history checker"),
            "{unseen}"
        );
        assert!(disagree(&oversold, Verdict::NotLinearizable, "", false).is_some());
        let late = disagree(&safe, Verdict::Undecided, "", false).unwrap();
        assert!(late.contains("could not decide"), "{late}");
        assert!(disagree(&safe, Verdict::Linearizable, "", true).is_some());
        // A ledger Redis lost: the soak's judge says LEDGER_LOST.
        assert_eq!(
            disagree(&counted(None, true), Verdict::Unsafe, "", false),
            None
        );
    }

    /// A round whose buyers sent nothing through the recording client,
    /// and one whose history holds an oversell nobody saw in the ledger.
    #[tokio::test]
    async fn a_round_is_judged_from_its_recorded_history() {
        let recorder = Recorder::prefixed("lua/");
        recorder.declare("s", 2);
        let c = recorder.client();
        recorder.told(recorder.call("s"), c, Some("s-0"), history::Told::Sold(2));
        recorder.told(recorder.call("s"), c, Some("s-1"), history::Told::Sold(1));
        recorder.read("s", recorder.now(), 0);
        let fine = judge(&recorder, 2, &counted(None, false)).await;
        assert_eq!(fine.verdict, "linearizable", "{fine:?}");
        assert_eq!((fine.ops, fine.disagreement), (3, None));
        let bypassed = judge(&Recorder::new(), 5, &counted(None, false)).await;
        assert!(bypassed.disagreement.is_some(), "{bypassed:?}");

        recorder.declare("t", 1);
        recorder.told(recorder.call("t"), c, Some("t-0"), history::Told::Sold(1));
        recorder.told(recorder.call("t"), c, Some("t-1"), history::Told::Sold(1));
        let twice = judge(&recorder, 2, &counted(None, false)).await;
        assert_eq!(twice.verdict, "unsafe", "{twice:?}");
        let said = twice.disagreement.unwrap();
        assert!(said.contains("contradicts the soak's judge"), "{said}");
    }
}
