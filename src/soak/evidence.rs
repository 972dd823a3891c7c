//! A violation is a reproduction: what a judged round keeps of itself
//! ([`Evidence`]: its window, its last attempts, its recorded history and
//! the history checker's verdict), and the violation built from it, with
//! every fault that struck any part of the stack in and around its window.
//! A round's own violations and its order books' (reconciled later) are
//! built alike.

use super::buyers::Round;
use super::faults::GRACE_S;
use crate::wire::{HistoryJudgement, SoakFault, SoakViolation};

/// Attempts of a round shown in a violation (the last ones).
pub const ATTEMPTS_SHOWN: usize = 60;
/// How far before and after its window a fault is listed with a round.
pub const AROUND_S: f64 = 5.0;

/// What a judged round keeps for the violations found in it now or later
/// (its order books, reconciled once its messages are orders).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evidence {
    pub variant: String,
    pub sku: String,
    /// The round's window, seconds from the start of the load.
    pub from_s: f64,
    pub to_s: f64,
    /// Its last [`ATTEMPTS_SHOWN`] attempts, one line each, in time order.
    pub attempts: Vec<String>,
    /// Its history as its buyers recorded it (JSON Lines).
    pub recorded: Vec<String>,
    /// The history checker's verdict of it.
    pub history_check: Option<HistoryJudgement>,
}

impl Evidence {
    /// What `round` keeps, beside the history checker's verdict of it.
    pub fn of(round: &Round, history_check: Option<HistoryJudgement>) -> Evidence {
        Evidence {
            variant: round.variant.name().to_owned(),
            sku: round.sku.clone(),
            from_s: round.from_ms as f64 / 1e3,
            to_s: round.to_ms as f64 / 1e3,
            attempts: attempt_lines(round),
            recorded: on_load_clock(&round.recorder.text(), round.clock_ns),
            history_check,
        }
    }

    /// A violation of this round: `what`, its window, every fault of
    /// `faults` around it, its attempts and history, and the rerun.
    pub fn violation(&self, what: String, faults: &[SoakFault], rerun: &str) -> SoakViolation {
        SoakViolation {
            variant: self.variant.clone(),
            sku: self.sku.clone(),
            what,
            from_s: self.from_s,
            to_s: self.to_s,
            faults: around(faults, self.from_s, self.to_s),
            history: self.attempts.clone(),
            history_check: self.history_check.clone(),
            recorded: self.recorded.clone(),
            timeline: None,
            rerun: rerun.to_owned(),
        }
    }
}

/// Every fault that struck between `from_s` and `to_s` (and
/// [`AROUND_S`] either side, or within the grace after it healed),
/// whatever it hit: an instance killed for another variant's round, or a
/// Redis restarted, takes this round's requests in flight with it too.
/// A fault the stack refused, or that failed after it struck, is listed
/// with its error.
pub fn around(faults: &[SoakFault], from_s: f64, to_s: f64) -> Vec<String> {
    faults
        .iter()
        .filter(|f| f.at_s <= to_s + AROUND_S && f.healed_s + GRACE_S >= from_s - AROUND_S)
        .map(|f| {
            format!(
                "{:.1} s {} {} (healed {:.1} s){}",
                f.at_s,
                f.kind,
                f.target,
                f.healed_s,
                if f.error.is_empty() {
                    String::new()
                } else {
                    format!(" failed: {}", f.error)
                }
            )
        })
        .collect()
}

/// A round's recorded history (JSON Lines) with its times moved `by` ns:
/// from the recorder's clock to the load's, so that every round's history
/// and the faults' moments are on one clock. A line that is not JSON is
/// kept as it is (the checker will say which).
pub fn on_load_clock(text: &str, by: u64) -> Vec<String> {
    text.lines()
        .map(|line| {
            let Ok(mut op) = serde_json::from_str::<serde_json::Value>(line) else {
                return line.to_owned();
            };
            for key in ["call", "ret"] {
                if let Some(t) = op.get_mut(key)
                    && let Some(at) = t.as_u64()
                {
                    *t = (at + by).into();
                }
            }
            op.to_string()
        })
        .collect()
}

/// The round's last attempts, one line each: time, id, attempt, status,
/// what it settled, the reason, the instance, whether replayed, how long.
fn attempt_lines(round: &Round) -> Vec<String> {
    let mut lines: Vec<(u64, String)> = round
        .requests
        .iter()
        .flat_map(|r| {
            r.attempts.iter().enumerate().map(move |(n, a)| {
                (
                    a.at_ms,
                    format!(
                        "{:>9.3} s  {}  attempt {}  {} {:?}{}{}{}  {} ms",
                        a.at_ms as f64 / 1e3,
                        r.id,
                        n + 1,
                        a.status,
                        a.got,
                        a.reason
                            .as_deref()
                            .map(|r| format!(" {r}"))
                            .unwrap_or_default(),
                        a.instance
                            .as_deref()
                            .map(|i| format!(" @{i}"))
                            .unwrap_or_default(),
                        if a.replayed { " replayed" } else { "" },
                        a.took_ms
                    ),
                )
            })
        })
        .collect();
    lines.sort();
    let skip = lines.len().saturating_sub(ATTEMPTS_SHOWN);
    lines.into_iter().skip(skip).map(|(_, l)| l).collect()
}
