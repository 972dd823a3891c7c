//! The teaching text of a variant: what its card, `/api/variants` and
//! the lab's matrix say of it.

use std::time::Duration;

use super::Claims;

/// The teaching text of a variant. Each variant's file opens with the same
/// words in its module comment.
pub struct About {
    /// One line: what protects the critical section.
    pub protection: &'static str,
    /// What it does, what breaks it, which scenario shows it.
    pub explanation: &'static str,
    /// The same two in Chinese, for the dashboard's 中文 view.
    pub protection_zh: &'static str,
    pub explanation_zh: &'static str,
    /// The lines of code that matter.
    pub code: &'static str,
    pub default_lease: Option<Duration>,
    pub default_wait: Option<Duration>,
    /// What it does in each scenario of the lab: its row of the matrix.
    /// A safe race claim has no note: `stocklock load` compares it with "safe".
    pub claims: Claims,
    /// Why it is expected to under-sell a race (turn buyers away while
    /// stock is left), if it is.
    pub undersells: Option<Reason>,
}

/// A reason, in English and in Chinese (the dashboard's 中文 view).
pub struct Reason {
    pub en: &'static str,
    pub zh: &'static str,
}
