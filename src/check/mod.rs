//! `stocklock check`: each variant's protocol model-checked in each
//! scenario of the lab it can be modelled in, beside the lab's live verdict.
//!
//! The lab forces each failure once with a fault; the checker tries every
//! order of every buyer's commands and of the scenario's faults within
//! small bounds ([`model::Bounds`], printed with each verdict), breadth
//! first (the `stateright` crate), so that a counterexample it reports is
//! a shortest one. Every verdict rests on a schedule the search found: a
//! counterexample, or a witness that goes through the scenario's faults
//! (a sale once each of them struck; another buyer's sale after a holder
//! died; the whole stock sold; a sale once a fault is over); a cell with
//! neither is `vacuous` and fails. A verdict is a bounded check of a model of the protocol,
//! not a proof of the code: `docs/models.md` says what is modelled and what
//! is abstracted away.
//!
//! - [`protocol`]: which protocol each variant runs, and what its store adds.
//! - [`model`]: the buyers, the store, time and the faults; and each
//!   protocol's program, a file of its own ([`model::setnx`], [`model::lease`], ...).
//! - [`order`], [`pipeline`]: the order pipeline's state, and its steps
//!   and properties (`lua-then-queue`, `lua-stream`).
//! - [`property`]: what is checked: the properties a counterexample breaks,
//!   and the witnesses a verdict with no counterexample rests on.
//! - [`bounds`](mod@bounds): each scenario's bounds (which faults strike where), and
//!   the bounds the command line may set.
//! - [`report`]: the command's table, bounds and JSON.
//! - [`draw`]: a counterexample (or a witness) as a timeline, drawn as a live run is.
//! - `trace`: a schedule's steps in words (English and Chinese, each step
//!   a [`crate::wire::Said`]); `words`: a verdict's summary and step count
//!   in both; `sale`: the model's start and
//!   the actions it may take; `faults`: what the faults and time do;
//!   `memo`: each verdict computed once a process ([`warm`] computes them
//!   ahead, on a thread of their own).

pub mod bounds;
pub mod draw;
mod faults;
mod memo;
pub mod model;
pub mod order;
pub mod pipeline;
pub mod property;
pub mod protocol;
pub mod report;
pub(crate) mod runs;
mod sale;
mod trace;
mod words;

use std::time::{Duration, Instant};

use stateright::Model;

use crate::variants::Scenario;
use crate::variants::{Behaviour, Variant};
pub use bounds::{Limits, bounds};
pub use memo::warm;
use model::{Action, Bounds, Mutation, Sale, World};
pub use property::{Property, holds};
use protocol::Protocol;
pub use report::CheckArgs;
pub use trace::{describe, steps};
pub use words::{VACUOUS_ZH, steps_in_words, steps_said};

impl Model for Sale {
    type State = World;
    type Action = Action;

    fn init_states(&self) -> Vec<World> {
        vec![self.initial()]
    }

    fn actions(&self, state: &World, actions: &mut Vec<Action>) {
        Sale::actions(self, state, actions);
    }

    fn next_state(&self, state: &World, action: Action) -> Option<World> {
        self.next(state, action)
    }

    /// The one property this run checks: stateright keeps a property's
    /// first counterexample (the shortest, breadth first) only when it stops
    /// there, which it does once every property it checks has one.
    fn properties(&self) -> Vec<stateright::Property<Self>> {
        let property = self.property;
        vec![match property.is_witness() {
            true => {
                stateright::Property::sometimes(property.name(), |m, w| holds(m.property, m, w))
            }
            false => stateright::Property::always(property.name(), |m, w| holds(m.property, m, w)),
        }]
    }
}

/// What the checker concluded for one cell.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Verdict {
    pub variant: &'static str,
    pub scenario: &'static str,
    /// The variant's claim in the lab's matrix.
    pub claim: &'static str,
    /// What the model shows, in the matrix's words, or `vacuous`: no
    /// schedule shows the verdict (not even a sale), which fails the cell.
    pub model: &'static str,
    /// `claim` and `model` in Chinese.
    pub claim_zh: &'static str,
    pub model_zh: &'static str,
    pub agrees: bool,
    /// States the checker visited (distinct).
    pub states: usize,
    pub millis: u64,
    pub bounds: Bounds,
    /// The property a counterexample breaks, and its steps (shortest).
    pub broken: Option<Property>,
    /// `broken`'s name in Chinese.
    pub broken_zh: Option<&'static str>,
    pub trace: Vec<Step>,
    /// For a verdict no counterexample shows: the witness it rests on (a
    /// sale once the scenario's faults struck; another buyer's sale after
    /// a holder died; the whole stock sold; a sale after Redis or the nodes
    /// came back), and its steps.
    pub witnessed: Option<Property>,
    /// `witnessed`'s name in Chinese.
    pub witnessed_zh: Option<&'static str>,
    pub witness: Vec<Step>,
}

/// The model's word for a cell whose verdict no schedule shows.
pub const VACUOUS: &str = "vacuous";

/// One step of a counterexample, as the trace prints it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Step {
    pub action: Action,
    /// What the step did, in words, and in Chinese.
    pub text: String,
    pub text_zh: String,
    /// The tick it happened at.
    pub at: u8,
}

/// Each found property's model (the property in it) and shortest path
/// (a counterexample, or a witness: its states and actions), the most
/// states one run explored, and the time all took.
pub type Explored = (Vec<(Sale, Vec<(World, Option<Action>)>)>, usize, Duration);

/// Checks `protocol` (with `mutation`) within `bounds`, one run per
/// property of `properties`: the shortest counterexample (or witness) of
/// each, and the most states one run explored (all of them when it found
/// none).
pub fn explore(
    protocol: Protocol,
    bounds: Bounds,
    mutation: Mutation,
    properties: &[Property],
) -> Explored {
    let started = Instant::now();
    let mut found = Vec::new();
    let mut states = 0;
    for &property in properties {
        let sale = Sale {
            protocol,
            bounds,
            mutation,
            property,
        };
        let (visited, path) = runs::run(sale);
        states = states.max(visited);
        if let Some(path) = path {
            found.push((sale, path));
        }
    }
    (found, states, started.elapsed())
}

/// The properties a cell's verdict rests on, from its bounds and its
/// protocol alone (never from its claim): no unit sold twice, and a sale
/// reachable once the scenario's faults struck, always; a SKU left stuck,
/// and another buyer selling after a holder died, where a holder can die
/// (with two stores and no lock: no buyer told sold out while the database
/// holds stock, and the whole stock sold through the crash); where
/// Redlock's nodes are down, nothing sold without a majority, or the whole
/// stock sold with one; one sale per id where buyers retry; the orders
/// where there are orders.
fn properties_of(bounds: Bounds, protocol: Protocol) -> Vec<Property> {
    let mut properties = vec![Property::Safety, Property::Sells];
    if protocol.two_stores() {
        properties.push(Property::SoldOutBacked);
        if bounds.crashes > 0 {
            properties.push(Property::SellsAll);
        }
    } else if bounds.crashes > 0 {
        properties.extend([Property::Stuck, Property::Frees]);
    } else if silenced_database_lock(bounds, protocol) {
        properties.push(Property::SilenceEnded);
    }
    if node_fault_only(bounds) {
        properties.push(match majority_down(bounds) {
            true => Property::NoSaleWhileDown,
            false => Property::SellsAll,
        });
    }
    if bounds.one_request || bounds.cutoffs > 0 || bounds.db_crashes > 0 || bounds.lost_answers > 0
    {
        properties.push(Property::OneSale);
    }
    if bounds.orders.is_some() {
        properties.extend([Property::OrderedOnce, Property::OrdersKept]);
    }
    properties
}

/// A database lock's holder frozen: the database must end its session
/// (its idle timeout, the lease) for anyone else to sell.
fn silenced_database_lock(bounds: Bounds, protocol: Protocol) -> bool {
    bounds.pauses > 0 && protocol.program == protocol::Program::Transaction
}

/// Redlock's nodes down, and no other fault: does the lock still sell?
fn node_fault_only(bounds: Bounds) -> bool {
    bounds.nodes_down > 0 && bounds.pauses == 0
}

/// At least half of Redlock's nodes down: no majority left.
fn majority_down(bounds: Bounds) -> bool {
    bounds.nodes - bounds.nodes_down < bounds.nodes / 2 + 1
}

/// What the model shows of one cell, from what its search found: the
/// behaviour, and the counterexample or the witness it rests on (`None`:
/// nothing found shows any verdict: vacuous).
fn conclude<'a, T>(
    bounds: Bounds,
    protocol: Protocol,
    by: impl Fn(Property) -> Option<&'a T>,
) -> Option<(Behaviour, Property, &'a T)> {
    let found = |property| by(property).map(|t| (property, t));
    let shown = |behaviour, property| found(property).map(|(p, t)| (behaviour, p, t));
    // A counterexample: the failure it shows.
    for (property, behaviour) in [
        (Property::Safety, Behaviour::Oversells),
        (Property::OneSale, Behaviour::Oversells),
        (Property::OrderedOnce, Behaviour::Oversells),
        (Property::OrdersKept, Behaviour::LosesUnits),
        (Property::SoldOutBacked, Behaviour::LosesUnits),
        (Property::Stuck, Behaviour::Deadlock),
        (Property::NoSaleWhileDown, Behaviour::KeepsSelling),
    ] {
        if let Some(shown) = shown(behaviour, property) {
            return Some(shown);
        }
    }
    // No counterexample: the witness the claimable verdict rests on.
    if bounds.orders.is_some() {
        shown(Behaviour::Safe, Property::Sells)
    } else if bounds.outages > 0 {
        shown(Behaviour::Recovers, Property::Sells)
    } else if bounds.crashes > 0 && protocol.two_stores() {
        // No lock for a dead buyer to leave: the stock it took in Redis
        // must still sell.
        shown(Behaviour::KeepsSelling, Property::SellsAll)
    } else if bounds.crashes > 0 {
        shown(Behaviour::Frees, Property::Frees)
    } else if silenced_database_lock(bounds, protocol) {
        shown(Behaviour::Safe, Property::SilenceEnded)
    } else if node_fault_only(bounds) && majority_down(bounds) {
        shown(Behaviour::Busy, Property::Sells)
    } else if node_fault_only(bounds) {
        shown(Behaviour::KeepsSelling, Property::SellsAll)
    } else {
        shown(Behaviour::Safe, Property::Sells)
    }
}

/// The verdict of one cell, or `None` when the matrix has no such cell
/// (the scenario does not apply to the variant).
/// Computed once a process (the `memo` module).
pub fn check(variant: Variant, scenario: Scenario) -> Option<Verdict> {
    memo::remembered(variant, scenario, || {
        check_within(variant, scenario, &Limits::default())
    })
}

/// [`check`] with some bounds raised or lowered from the command line.
pub fn check_within(variant: Variant, scenario: Scenario, limits: &Limits) -> Option<Verdict> {
    check_mutated(variant, scenario, limits, Mutation::default())
}

/// [`check_within`] of the protocol with `mutation` (a part taken out).
pub fn check_mutated(
    variant: Variant,
    scenario: Scenario,
    limits: &Limits,
    mutation: Mutation,
) -> Option<Verdict> {
    let claim = scenario.claim(variant);
    if !claim.applies() {
        return None;
    }
    let protocol = Protocol::of(variant);
    let bounds = limits.apply(bounds(scenario, protocol));
    let (found, states, took) =
        explore(protocol, bounds, mutation, &properties_of(bounds, protocol));
    let by = |property| found.iter().find(|(sale, _)| sale.property == property);
    let concluded = conclude(bounds, protocol, by);
    let model = concluded.map_or(VACUOUS, |(behaviour, _, _)| behaviour.name());
    let model_zh = concluded.map_or(VACUOUS_ZH, |(behaviour, _, _)| behaviour.name_zh());
    let (mut broken, mut trace, mut witnessed, mut witness) = (None, Vec::new(), None, Vec::new());
    if let Some((_, property, (sale, path))) = concluded {
        match property.is_witness() {
            true => (witnessed, witness) = (Some(property), steps(sale, path)),
            false => (broken, trace) = (Some(property), steps(sale, path)),
        }
    }
    Some(Verdict {
        variant: variant.name(),
        scenario: scenario.name(),
        claim: claim.behaviour.name(),
        model,
        claim_zh: claim.behaviour.name_zh(),
        model_zh,
        agrees: model == claim.behaviour.name(),
        states,
        millis: took.as_millis() as u64,
        bounds,
        broken,
        broken_zh: broken.map(Property::name_zh),
        trace,
        witnessed,
        witnessed_zh: witnessed.map(Property::name_zh),
        witness,
    })
}

impl Verdict {
    /// The schedule the verdict rests on: its counterexample, or its
    /// witness; and the property either shows.
    pub fn schedule(&self) -> Option<(Property, &[Step])> {
        match (self.broken, self.witnessed) {
            (Some(property), _) => Some((property, &self.trace)),
            (None, Some(property)) => Some((property, &self.witness)),
            (None, None) => None,
        }
    }
}

/// Every cell of the matrix (each one the checker models), in its order.
pub fn cells() -> Vec<(Variant, Scenario)> {
    let mut cells = Vec::new();
    for variant in Variant::ALL {
        for scenario in Scenario::ALL {
            if scenario.claim(variant).applies() {
                cells.push((variant, scenario));
            }
        }
    }
    cells
}

#[cfg(test)]
mod earned;
#[cfg(test)]
mod mutations;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod two_stores_tests;
#[cfg(test)]
mod witness_tests;
#[cfg(test)]
mod zh_tests;
