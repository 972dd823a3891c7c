//! The judges against hand-made evidence: each decides in the documented
//! order (landed, the ledger, earned) and tells its behaviours apart.

mod branches;
mod crowd;
mod duel;
mod outage;
mod recovery;
mod said;

use std::time::Duration;

use super::*;
use crate::variants::Behaviour::*;
use crate::variants::{Reason, Scenario, Variant};
use crate::wire::{LockState, StateSnapshot};

/// The Latin words a Chinese sentence of the lab may keep beyond the
/// rule's own ([`Said::stray_english`]): the variants' and scenarios' names.
pub(in crate::judge) fn allowed() -> Vec<&'static str> {
    let variants = Variant::ALL.map(|v| v.name());
    let scenarios = Scenario::ALL.map(|s| s.name());
    variants.into_iter().chain(scenarios).collect()
}

/// Panics unless `said` is said in Chinese too: not empty, not the English
/// left as it was (where the English has words), and no English word
/// left in it. Every judgement a test makes passes through here
/// ([`Judgement::new`]).
pub(in crate::judge) fn said_in_both(said: &Said) {
    let english = !crate::wire::said::english_words(&said.en).is_empty();
    assert!(
        !said.zh.trim().is_empty() || !english,
        "no Chinese for {:?}",
        said.en
    );
    assert!(
        said.zh != said.en || !english,
        "the Chinese is the English: {:?}",
        said.en
    );
    let stray = said.stray_english(&allowed());
    assert!(
        stray.is_empty(),
        "English words {stray:?} in the Chinese {:?} (of {:?})",
        said.zh,
        said.en
    );
}

fn state(initial: i64, remaining: i64, sold: i64) -> StateSnapshot {
    StateSnapshot::counted(initial, remaining, sold)
}

fn ledger(state: StateSnapshot) -> Ledger {
    Ledger {
        state,
        ..Ledger::default()
    }
}

fn reply(status: u16, reason: Option<&str>, took_ms: u64) -> Reply {
    Reply {
        status,
        reason: reason.map(str::to_owned),
        replayed: false,
        unknown: false,
        unit: None,
        took: Duration::from_millis(took_ms),
    }
}

fn observed(judgement: Judgement) -> Observed {
    judgement.observed
}
