//! The judges against hand-made evidence: each decides in the documented
//! order (landed, the ledger, earned) and tells its behaviours apart.

mod crowd;
mod duel;
mod outage;
mod recovery;

use std::time::Duration;

use super::*;
use crate::variants::Behaviour::*;
use crate::wire::{LockState, StateSnapshot};

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
