//! "Show me the shortest way": the checker's shortest counterexample of a
//! cell as step mode's steps. Each model step of a buyer is that buyer let
//! go from the gate where the model has it (and from any gate of the live
//! code the model has no step for, on the way); each fault is the same
//! fault struck live; a tick on which the model's lock runs out is the
//! lease run out. Time that passes with nothing running out is nothing to
//! play.

use crate::check::model::{Action, World};
use crate::check::{self, Verdict};
use crate::explore::Choice;
use crate::gate::buyer_name as name;
use crate::variants::{Scenario, Variant};

/// Whether the lock of `w` ran out: its TTL, or (`setnx-expiry`) the
/// expiry time written in its value.
fn ran_out(w: &World) -> bool {
    w.lock.is_some_and(|lock| {
        lock.expires.is_some_and(|at| at <= w.now) || (lock.value > 0 && lock.value <= w.now)
    })
}

/// One step of the shortest way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Hint {
    /// The buyer goes on until it has left `gate`.
    Advance {
        buyer: String,
        gate: &'static str,
    },
    Strike(Choice),
}

/// The shortest way to break `variant` in `scenario`, with the checker's
/// verdict; `Err` where the checker finds none, or has one step mode
/// cannot play.
pub(super) fn plan(variant: Variant, scenario: Scenario) -> Result<(Vec<Hint>, Verdict), String> {
    let verdict = check::check(variant, scenario)
        .ok_or_else(|| format!("the checker has no model of {variant} in {scenario}"))?;
    if verdict.broken.is_none() {
        return Err(format!(
            "the checker finds no way to break {variant} in {scenario}: it is {}",
            verdict.model
        ));
    }
    let (_, worlds) = check::draw::replay(&verdict).ok_or("the checker's trace does not replay")?;
    let mut hints = Vec::new();
    for (k, step) in verdict.trace.iter().enumerate() {
        let (before, after) = (&worlds[k], &worlds[k + 1]);
        let hint = match step.action {
            Action::Step(n) => {
                let from = before.buyers[usize::from(n)].pc;
                match crate::replay::gate_of(from)? {
                    Some(gate) => Hint::Advance {
                        buyer: name(n),
                        gate,
                    },
                    // A command between two gates: the release before it
                    // carries the buyer through.
                    None => continue,
                }
            }
            Action::Tick
                if before.lock.is_some()
                    && (after.lock.is_none() || !ran_out(before) && ran_out(after)) =>
            {
                Hint::Strike(Choice::Expire)
            }
            Action::Tick | Action::RedisDown => continue,
            Action::LateTick(n) => Hint::Strike(Choice::Late { buyer: name(n) }),
            Action::Crash(n) => Hint::Strike(Choice::Crash { buyer: name(n) }),
            Action::Freeze(n) => Hint::Strike(Choice::Freeze { buyer: name(n) }),
            Action::Vanish => Hint::Strike(Choice::Vanish),
            Action::RedisBack => Hint::Strike(Choice::Restart),
            other => return Err(format!("step mode cannot play the checker's {other:?}")),
        };
        hints.push(hint);
    }
    Ok((hints, verdict))
}
