//! The teaching text of a variant: what its card, `/api/variants` and
//! the lab's matrix say of it.

use std::time::Duration;

use super::{Claims, Variant};
use crate::wire::{VariantInfo, Verdicts};

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

impl Variant {
    /// What `/api/variants` says of it.
    pub fn info(self) -> VariantInfo {
        let about = self.about();
        let claims = &about.claims;
        VariantInfo {
            name: self.name().to_owned(),
            protection: about.protection.to_owned(),
            explanation: about.explanation.to_owned(),
            protection_zh: about.protection_zh.to_owned(),
            explanation_zh: about.explanation_zh.to_owned(),
            code: about.code.trim().to_owned(),
            default_lease_ms: about.default_lease.map(|d| d.as_millis() as u64),
            default_wait_ms: about.default_wait.map(|d| d.as_millis() as u64),
            // The teaching matrix's five columns, read from the lab's scenarios.
            expected: Verdicts {
                two_instances: claims.race.text(),
                work_exceeds_lease: claims.slow_business.text(),
                crash_after_acquire: claims.crash_after_acquire.text(),
                pause_exceeds_lease: claims.pause_holder.text(),
                redis_minority_down: claims.redlock_minority_down.text(),
            },
            undersells: about.undersells.as_ref().map(|r| r.en.to_owned()),
            undersells_zh: about.undersells.as_ref().map(|r| r.zh.to_owned()),
            orders: self.orders(),
        }
    }
}
