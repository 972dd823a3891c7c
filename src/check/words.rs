//! A verdict in words, in both languages of the pages: its steps counted,
//! and its summary.

use super::Verdict;
use crate::wire::Said;

/// `n` steps in words: "1 step", "14 steps" ("1 步", "14 步").
pub fn steps_said(n: usize) -> Said {
    match n {
        1 => crate::said!("1 step", "1 步"),
        n => crate::said!("{n} steps", "{n} 步"),
    }
}

/// `n` steps in words: "1 step", "14 steps".
pub fn steps_in_words(n: usize) -> String {
    steps_said(n).en
}

/// The model's word for a cell whose verdict no schedule shows, in Chinese.
pub const VACUOUS_ZH: &str = "无结论";

impl Verdict {
    /// The verdict in a few words, as the lab's report and the lessons
    /// show it beside the live one: `oversells: counterexample in 14
    /// steps`, `safe: no violation within bounds (812 states), witness in 6 steps`.
    pub fn summary(&self) -> String {
        self.said_summary().en
    }

    /// [`Verdict::summary`] in Chinese: `超卖:反例 14 步`.
    pub fn summary_zh(&self) -> String {
        self.said_summary().zh
    }

    /// [`Verdict::summary`] in both languages.
    pub fn said_summary(&self) -> Said {
        let (model, model_zh, states) = (self.model, self.model_zh, self.states);
        match (self.broken, self.witnessed) {
            (Some(_), _) => {
                let steps = steps_said(self.trace.len());
                Said {
                    en: format!("{model}: counterexample in {}", steps.en),
                    zh: format!("{model_zh}:反例 {}", steps.zh),
                }
            }
            (None, Some(_)) => {
                let steps = steps_said(self.witness.len());
                Said {
                    en: format!(
                        "{model}: no violation within bounds ({states} states), witness in {}",
                        steps.en
                    ),
                    zh: format!(
                        "{model_zh}:边界内没有违反({states} 个状态),见证 {}",
                        steps.zh
                    ),
                }
            }
            (None, None) => Said {
                en: format!("{model}: no schedule shows a verdict within bounds ({states} states)"),
                zh: format!("{model_zh}:边界内没有任何调度给出结论({states} 个状态)"),
            },
        }
    }
}
