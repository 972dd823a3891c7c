//! `load --history`: each run's history, recorded by the engine's workers,
//! judged by the history checker beside the ledger's verdict.
//!
//! The two judges look at different evidence (the ledger counts what the
//! store wrote; the history only what the clients were told, and the books
//! read at the end), so they must agree on the one thing both can see:
//! whether the run was safe.

use std::time::Duration;

use super::verdict::Verdict;
use crate::history::{self, Recorder, Verdict as HistoryVerdict};
use crate::wire::{HistoryJudgement, StateSnapshot};

/// Time the checker has for each SKU: undecided after it, which fails.
pub(super) const PER_SKU: Duration = Duration::from_secs(30);

/// Declares each of `skus` with the stock it had before the run (its units
/// are `1..=remaining`: a sale's unit is the stock it read); their names in
/// the history.
pub(super) fn declare(recorder: &Recorder, before: &[StateSnapshot]) -> Vec<String> {
    before
        .iter()
        .map(|state| recorder.declare(&state.sku, state.remaining))
        .collect()
}

/// Notes the books read after the run (between `call` and now).
pub(super) fn read_books(recorder: &Recorder, call: u64, after: &[StateSnapshot]) {
    for state in after {
        recorder.read(&state.sku, call, state.remaining);
    }
}

/// The checker's verdict of the run's SKUs `names`, and whether it and the
/// ledger's `ledger` disagree on safety.
pub(super) fn judge(recorder: &Recorder, names: &[String], ledger: &Verdict) -> HistoryJudgement {
    let histories = match recorder.histories_of(names) {
        Ok(histories) => histories,
        Err(bad) => {
            return HistoryJudgement {
                verdict: HistoryVerdict::Undecided.as_str().to_owned(),
                why: format!("the recorded history cannot be read: {bad}"),
                ops: 0,
                elapsed_ms: 0,
                disagreement: Some("the history could not be judged".to_owned()),
            };
        }
    };
    let report = history::check(&histories, PER_SKU);
    let worst = report.worst();
    let why = report
        .skus
        .iter()
        .find(|d| d.verdict == worst)
        .map_or_else(String::new, |d| format!("{}: {}", d.sku, d.why));
    let ledger_unsafe = matches!(
        ledger,
        Verdict::Oversold(_) | Verdict::Duplicates(_) | Verdict::LedgerBroken(_)
    );
    let disagreement = match (worst, ledger_unsafe) {
        (HistoryVerdict::Undecided, _) => {
            Some("the history checker could not decide in time".to_owned())
        }
        (HistoryVerdict::Unsafe, false) => Some(format!(
            "the ledger says {ledger}, the history is unsafe: the ledger is wrong \
             (or blind to what the clients were told)"
        )),
        (HistoryVerdict::Linearizable | HistoryVerdict::NotLinearizable, true) => Some(format!(
            "the ledger says {ledger}, the history is {}: the answers and the books \
             fit one stock, so the ledger counted what did not happen",
            worst.as_str()
        )),
        _ => None,
    };
    HistoryJudgement {
        verdict: worst.as_str().to_owned(),
        why,
        ops: histories.iter().map(|h| h.ops.len()).sum(),
        elapsed_ms: report.elapsed_ms,
        disagreement,
    }
}
