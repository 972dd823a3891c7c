//! `stocklock replay`: the checker's shortest counterexample of one cell,
//! driven step for step through the real code on a live stack.
//!
//! Each model buyer (A, B, C) is one scheduled request on an instance of
//! its own ([`crate::gate`]). A model step of a buyer lets it go from the
//! gate that stands for where the model has it, and waits for it at the
//! gate that stands for where the model's step takes it (or for its
//! answer, when the model's buyer is done). Steps that happen inside one
//! stretch of the real code with no gate between them (`setnx-expiry`'s
//! GET and GETSET) pass without a release. A tick on which the model's
//! lease runs out waits until the live lock is gone (real time: replays
//! use a short lease); a deleted lock is deleted live; a crash is a buyer
//! never let go again (its lock as a dead holder leaves it: a Redis lock
//! cannot tell the difference). A failover kills the master of a
//! replicated Redis (`failover.rs`); the gates then meet on a Redis apart.
//! At the end the live ledger is read and judged against the property the
//! model's trace breaks.

use crate::check::model::{Action, At, Pc, setnx};
use crate::check::order::OrderStep;
use crate::check::{self, Property, Verdict};

mod all;
mod cli;
mod failing;
mod failover;
mod live;
pub(super) mod orders;
mod play;
mod redlock;
mod stacks;
mod verdict;

pub use cli::{ReplayArgs, replay, run};
pub use play::replay_on;
pub use stacks::{Beside, stack_for, start, start_failover, start_orders};
pub(crate) use verdict::sold_twice;

/// The shortest live lease of a replay that restarts Redlock nodes.
const NODE_RESTART_LEASE_MS: u64 = 3_000;

/// Where a buyer at `pc` waits live: its gate, or `None` for a model
/// step inside a stretch of code with no gate; `Err` for what the gates
/// cannot stand for yet.
pub(crate) fn gate_of(pc: Pc) -> Result<Option<&'static str>, String> {
    Ok(Some(match pc.at() {
        At::Start => "before_acquire",
        At::Held if pc == setnx::Pc::Expire.into() => "after_setnx",
        At::Held => "before_wait",
        At::Taking => return Ok(None),
        At::Read => "after_acquire",
        At::Work => "after_read",
        At::Check => "before_check",
        At::Write => "before_write",
        At::Release => "before_release",
        At::After => "before_enqueue",
        At::Done => "after_release",
        other => return Err(format!("a buyer {}", describe_at(other))),
    }))
}

fn describe_at(at: At) -> &'static str {
    match at {
        At::Claim => "claiming its request id",
        At::Round => "in a Redlock round",
        At::After => "adding its order after its script",
        At::Retry => "retrying a cut-off call",
        _ => "here",
    }
}

/// A Redlock buyer's place in its round (from its first vote to its
/// count), which `redlock.rs` plays; `None` for any other place.
fn round(pc: Pc) -> Option<check::model::redlock::Pc> {
    use check::model::redlock::Pc as Redlock;
    match pc {
        Pc::Redlock(p @ (Redlock::Acquire | Redlock::Vote | Redlock::Count)) => Some(p),
        _ => None,
    }
}

/// Why the cell cannot be replayed yet (`None`: it can).
pub fn unsupported(verdict: &Verdict) -> Option<String> {
    let Some(property) = verdict.broken else {
        return Some(format!(
            "{} in {} is {}: no counterexample to replay",
            verdict.variant, verdict.scenario, verdict.model
        ));
    };
    if !matches!(
        property,
        Property::Safety | Property::Stuck | Property::OrdersKept
    ) {
        return Some(format!(
            "its broken property ({}) is not judged live yet",
            property.name()
        ));
    }
    let Some((_, worlds)) = check::draw::replay(verdict) else {
        return Some("its trace does not replay in the model".to_owned());
    };
    for (k, step) in verdict.trace.iter().enumerate() {
        match step.action {
            Action::Step(n) => {
                for world in [&worlds[k], &worlds[k + 1]] {
                    let pc = world.buyers[usize::from(n)].pc;
                    if round(pc).is_some() {
                        continue;
                    }
                    if let Err(why) = gate_of(pc) {
                        return Some(format!("step {}: {why}", k + 1));
                    }
                }
            }
            Action::Tick
            | Action::LateTick(_)
            | Action::Crash(_)
            | Action::Freeze(_)
            | Action::Vanish
            | Action::Restart(_)
            | Action::HoldReplication
            | Action::Failover
            | Action::Order(OrderStep::DataLoss) => {}
            other => {
                return Some(format!(
                    "step {}: {other:?} is not played by replays yet",
                    k + 1
                ));
            }
        }
    }
    None
}

/// One replayed step: the model's words and what the live run showed.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Played {
    pub model: String,
    pub live: String,
}

/// A replay's result.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Replay {
    pub variant: &'static str,
    pub scenario: &'static str,
    /// The property the model's counterexample breaks.
    pub property: &'static str,
    pub steps: Vec<Played>,
    /// What the live ledger shows at the end.
    pub live: String,
    /// Whether the live run broke the same property.
    pub agrees: bool,
    /// The history checker's verdict of what the buyers were told.
    pub history: String,
    /// Set when it and the live ledger's verdict disagree on safety.
    pub disagreement: Option<String>,
    /// The history itself (`--history`), JSON Lines.
    #[serde(skip)]
    pub recorded: String,
}

/// Whether `verdict`'s cell plays the order pipeline: its replay needs a
/// stack with the orders on and the Redis `up` started (a data loss
/// restarts it).
pub fn needs_orders(verdict: &Verdict) -> bool {
    check::draw::replay(verdict).is_some_and(|(sale, _)| sale.bounds.orders.is_some())
}

/// Whether `verdict`'s cell kills or restarts Redlock nodes: its replay
/// needs a stack of its own (the nodes it started again stop with it).
pub fn kills_nodes(verdict: &Verdict) -> bool {
    check::draw::replay(verdict)
        .is_some_and(|(sale, _)| sale.bounds.nodes_down > 0 || sale.bounds.restarts > 0)
}

/// Whether `verdict`'s cell fails the lock's Redis over: its replay needs
/// a stack of its own ([`start_failover`]).
pub fn fails_over(verdict: &Verdict) -> bool {
    check::draw::replay(verdict).is_some_and(|(sale, _)| sale.bounds.failovers > 0)
}

/// The SKU a replay of `verdict` sells.
fn sku_of(verdict: &Verdict) -> String {
    format!("{}-{}", verdict.variant, verdict.scenario)
}
