//! The verdict of a run, read from the ledger: safe, oversold, duplicates,
//! stuck, or a broken ledger; whether it under-sold; and whether that
//! contradicts what the variant is expected to do.

use super::engine::Tally;
use crate::wire::{StateSnapshot, Unsold};

/// What the ledger says about one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Safe,
    /// Sales no stock backs.
    Oversold(i64),
    /// Units sold twice, with no oversell (possible when stock is written back wrong).
    Duplicates(i64),
    /// Stock left, nothing sold, everyone told busy: a lock nobody releases.
    Stuck,
    /// `oversold` below zero: stock left without a recorded sale. Every
    /// sale is recorded with its write, so this is the ledger itself broken,
    /// and it fails every check: it would hide as much real oversell.
    LedgerBroken(i64),
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Safe => f.write_str("SAFE"),
            Verdict::Oversold(n) => write!(f, "OVERSOLD {n}"),
            Verdict::Duplicates(n) => write!(f, "DUPLICATES {n}"),
            Verdict::Stuck => f.write_str("STUCK"),
            Verdict::LedgerBroken(n) => write!(f, "LEDGER_BROKEN {n}"),
        }
    }
}

/// A run's verdict, and whether it under-sold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judgement {
    pub verdict: Verdict,
    pub unsold: Option<Unsold>,
}

impl std::fmt::Display for Judgement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.verdict)?;
        if let Some(unsold) = &self.unsold {
            write!(f, ", {unsold}")?;
        }
        Ok(())
    }
}

/// Judges a run from the ledger after it (`refused`: the ledger's busy
/// answers during the run) and the client's counts. `broken` is the
/// negative oversell of any SKU of the run (0: none).
pub fn judge(
    after: &StateSnapshot,
    tally: &Tally,
    sold_in_run: i64,
    refused: i64,
    broken: i64,
) -> Judgement {
    let verdict = if broken < 0 {
        Verdict::LedgerBroken(broken)
    } else if after.oversold > 0 {
        Verdict::Oversold(after.oversold)
    } else if after.duplicates > 0 {
        Verdict::Duplicates(after.duplicates)
    } else if after.remaining > 0
        && sold_in_run == 0
        && tally.busy > 0
        && tally.busy + tally.errors.total() == tally.requests
    {
        Verdict::Stuck
    } else {
        Verdict::Safe
    };
    let unsold = (after.remaining > 0 && refused > 0).then_some(Unsold {
        left: after.remaining,
        refused,
    });
    Judgement { verdict, unsold }
}

/// Whether the verdict contradicts the variant's expectation. A variant
/// expected to oversell only has to show it when the run was built to: more
/// than one request at a time, business work to widen the gap, and at least
/// two instances serving (the matrix's "2 instances" column).
pub fn contradiction(expected: &str, verdict: &Verdict, designed_to_race: bool) -> Option<String> {
    let expected_safe = expected == "safe";
    let expected_to_fail = expected.starts_with("oversells");
    match verdict {
        Verdict::LedgerBroken(n) => Some(format!(
            "the ledger broke (oversold {n} < 0: stock left without a recorded sale); no verdict can be trusted"
        )),
        Verdict::Safe if expected_to_fail && designed_to_race => Some(format!(
            "expected '{expected}' under this load (2+ instances, concurrency > 1, work_ms > 0) but it stayed SAFE"
        )),
        Verdict::Safe => None,
        broken if expected_safe => Some(format!("expected safe, observed {broken}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::StateSnapshot;

    fn after(initial: i64, remaining: i64, sold: i64) -> StateSnapshot {
        StateSnapshot::counted(initial, remaining, sold)
    }

    fn tally(requests: u64, busy: u64) -> Tally {
        let mut tally = Tally::new();
        tally.requests = requests;
        tally.busy = busy;
        tally
    }

    #[test]
    fn a_negative_oversell_is_a_broken_ledger_that_fails_every_check() {
        // Stock left without a recorded sale: it would cancel one real oversell.
        let state = after(50, 40, 9);
        let judged = judge(&state, &tally(10, 0), 9, 0, state.oversold);
        assert_eq!(judged.verdict, Verdict::LedgerBroken(-1));
        assert_eq!(judged.to_string(), "LEDGER_BROKEN -1");
        for expected in ["safe", "oversells"] {
            for raced in [true, false] {
                assert!(contradiction(expected, &judged.verdict, raced).is_some());
            }
        }
        // The same numbers with the sale recorded: safe.
        let state = after(50, 40, 10);
        assert_eq!(
            judge(&state, &tally(10, 0), 10, 0, 0).verdict,
            Verdict::Safe
        );
    }

    #[test]
    fn stock_left_while_buyers_were_refused_is_under_selling() {
        let state = after(50, 45, 5);
        let judged = judge(&state, &tally(400, 395), 5, 395, 0);
        assert_eq!(judged.verdict, Verdict::Safe);
        assert_eq!(
            judged.to_string(),
            "SAFE, unsold 45 while 395 buyers were refused"
        );
        // Sold out: nothing left on the shelf, whatever was refused.
        let sold_out = after(50, 0, 50);
        assert_eq!(judge(&sold_out, &tally(400, 3), 50, 3, 0).unsold, None);
        // Stock left but nobody refused (a short run): not under-selling.
        assert_eq!(judge(&state, &tally(5, 0), 5, 0, 0).unsold, None);
        // Everyone refused and nothing sold: stuck, and under-selling too.
        let stuck = after(50, 50, 0);
        let judged = judge(&stuck, &tally(10, 10), 0, 10, 0);
        assert_eq!(
            judged.to_string(),
            "STUCK, unsold 50 while 10 buyers were refused"
        );
    }
}
