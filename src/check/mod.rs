//! `stocklock check`: each variant's protocol model-checked in each
//! scenario of the lab it can be modelled in, beside the lab's live verdict.
//!
//! The lab forces each failure once with a fault; the checker tries every
//! order of every buyer's commands and of the scenario's faults within
//! small bounds ([`model::Bounds`], printed with each verdict), breadth
//! first (the `stateright` crate), so that a counterexample it reports is
//! a shortest one. A verdict is a bounded check of a model of the protocol,
//! not a proof of the code: `docs/models.md` says what is modelled and what
//! is abstracted away.
//!
//! - [`protocol`]: each variant's protocol (how it locks, renews, fences, releases).
//! - [`model`]: the buyers, the store, time and the faults; the properties.
//! - [`order`], [`pipeline`]: the order pipeline's state, and its steps
//!   and properties (`lua-then-queue`, `lua-stream`).
//! - [`report`]: the command's table, bounds and JSON.
//! - [`draw`]: a counterexample as a timeline, drawn as a live run is.
//! - `trace`: a counterexample's steps in words; `steps`, `faults`: what a buyer's commands and the faults do.

pub mod draw;
mod faults;
pub mod model;
pub mod order;
pub mod pipeline;
pub mod protocol;
pub mod report;
mod steps;
mod trace;

use std::time::{Duration, Instant};

use stateright::{Checker, Model, Property};

use crate::variants::Scenario;
use crate::variants::{Behaviour, Variant};
use model::{Action, Bounds, Mutation, Sale, World};
use order::OrderFaults;
use protocol::Protocol;
pub use report::CheckArgs;
pub use trace::{describe, steps};

/// The properties, by the names the traces are reported under.
pub const SAFETY: &str = "every unit sold at most once";
pub const STUCK: &str = "the SKU can still be sold";
pub const OWN_LOCK: &str = "a release frees only its own lock";
/// Not a property that can break: an example of a sale, to tell a lock that
/// keeps selling through a fault from one that refuses every buyer.
pub const SELLS: &str = "a unit is sold";
/// Every buyer retries one request id, or each its own: each is sold at most once.
pub const ONE_SALE: &str = "one sale per request id";
/// The order pipeline: no sale ordered twice, no unit given back twice.
pub const ORDERED_ONCE: &str = "each sale one order, each unit given back once";
/// The order pipeline: no sale lost on its way to an order.
pub const ORDERS_KEPT: &str = "every sale reaches its order";

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
    fn properties(&self) -> Vec<Property<Self>> {
        vec![match self.property {
            SAFETY => Property::always(SAFETY, |m, w| holds(SAFETY, m, w)),
            STUCK => Property::always(STUCK, |m, w| holds(STUCK, m, w)),
            SELLS => Property::sometimes(SELLS, |m, w| holds(SELLS, m, w)),
            ONE_SALE => Property::always(ONE_SALE, |m, w| holds(ONE_SALE, m, w)),
            ORDERED_ONCE => Property::always(ORDERED_ONCE, |m, w| holds(ORDERED_ONCE, m, w)),
            ORDERS_KEPT => Property::always(ORDERS_KEPT, |m, w| holds(ORDERS_KEPT, m, w)),
            _ => Property::always(OWN_LOCK, |m, w| holds(OWN_LOCK, m, w)),
        }]
    }
}

/// Whether `property` holds in `w` (for [`SELLS`]: a unit was sold, after
/// Redis came back if it went down).
pub fn holds(property: &str, sale: &Sale, w: &World) -> bool {
    match property {
        SAFETY => model::sold_each_unit_once(w),
        STUCK => !model::stuck(w),
        SELLS => {
            w.sold.iter().any(|&n| n > 0)
                && (sale.bounds.outages == 0 || w.redis == model::Outage::Back)
        }
        ONE_SALE => {
            (!sale.bounds.one_request || model::one_sale_per_request(w))
                && w.script_sales.iter().all(|&n| n <= 1)
        }
        ORDERED_ONCE => pipeline::ordered_once(w),
        ORDERS_KEPT => pipeline::orders_kept(w),
        _ => !w.freed_anothers,
    }
}

/// The bounds of `scenario` for `protocol`.
pub fn bounds(scenario: Scenario, protocol: Protocol) -> Bounds {
    let redlock = protocol.acquire == protocol::Acquire::Majority;
    let base = Bounds {
        buyers: 3,
        stock: 2,
        lease: 2,
        work: 0,
        horizon: 8,
        one_process: false,
        crashes: 0,
        crash_only_in_work: false,
        pauses: 0,
        vanishes: 0,
        skew: 0,
        freeze: 0,
        // Three nodes stand for Redlock's five: a majority of two.
        nodes: if redlock { 3 } else { 0 },
        nodes_down: 0,
        restarts: 0,
        failovers: 0,
        wait_replicas: false,
        one_request: false,
        outages: 0,
        cutoffs: 0,
        orders: None,
    };
    // The order pipeline's scenarios: each sale's order, and these faults.
    let orders = |faults| Bounds {
        orders: Some(faults),
        ..base
    };
    match scenario {
        Scenario::OneInstance => Bounds {
            one_process: true,
            ..base
        },
        Scenario::Race => base,
        // The work outlives the lease.
        Scenario::SlowBusiness => Bounds { work: 3, ..base },
        Scenario::CrashAfterAcquire => Bounds { crashes: 1, ..base },
        // Frozen right before the write, past the lease.
        Scenario::PauseHolder => Bounds { pauses: 1, ..base },
        Scenario::KillInstance => Bounds {
            work: 1,
            crashes: 1,
            crash_only_in_work: true,
            ..base
        },
        // Deleted while its holder works, before the work's last tick.
        Scenario::LockVanishes => Bounds {
            work: 1,
            vanishes: 1,
            ..base
        },
        // The last buyer's clock runs a lease and a tick ahead.
        Scenario::ClockSkew => Bounds {
            work: 1,
            skew: 3,
            ..base
        },
        Scenario::RedlockMinorityDown => Bounds {
            nodes_down: 1,
            ..base
        },
        Scenario::RedlockMajorityDown => Bounds {
            nodes_down: 2,
            ..base
        },
        // The holder froze within its lease: with a node down, it holds the
        // other two; one of them restarts empty and the down one comes back.
        Scenario::RedlockRestartWithoutPersistence if redlock => Bounds {
            nodes_down: 1,
            pauses: 1,
            freeze: 1,
            restarts: 2,
            ..base
        },
        // One store: the lock is forgotten (deleted) under the frozen holder.
        Scenario::RedlockRestartWithoutPersistence => Bounds {
            pauses: 1,
            vanishes: 1,
            ..base
        },
        // Every buyer a retry of one request id, all at once.
        Scenario::RetryStorm => Bounds {
            one_request: true,
            ..base
        },
        // The master dies under a holder, its replica having missed the
        // writes since replication was held back.
        Scenario::Failover => Bounds {
            failovers: 1,
            ..base
        },
        Scenario::FailoverWait => Bounds {
            failovers: 1,
            wait_replicas: true,
            ..base
        },
        // Redis stops under the buyers and comes back empty.
        Scenario::RedisRestart => Bounds { outages: 1, ..base },
        // Two calls cut off by a paused Redis, each retried with its id.
        Scenario::RedisPause => Bounds { cutoffs: 2, ..base },
        Scenario::CrashBeforeEnqueue => Bounds {
            crashes: 1,
            ..orders(OrderFaults::default())
        },
        Scenario::WorkerCrashBeforeAck => orders(OrderFaults {
            worker_crashes: 1,
            ..OrderFaults::default()
        }),
        Scenario::PostgresRestart => orders(OrderFaults {
            postgres_stops: 1,
            ..OrderFaults::default()
        }),
        Scenario::ReservationExpiry => orders(OrderFaults {
            reservations: true,
            ..OrderFaults::default()
        }),
        Scenario::RedisDataLoss => orders(OrderFaults {
            data_losses: 1,
            ..OrderFaults::default()
        }),
    }
}

/// What the checker concluded for one cell.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Verdict {
    pub variant: &'static str,
    pub scenario: &'static str,
    /// The variant's claim in the lab's matrix.
    pub claim: &'static str,
    /// What the model shows, in the matrix's words.
    pub model: &'static str,
    pub agrees: bool,
    /// States the checker visited (distinct).
    pub states: usize,
    pub millis: u64,
    pub bounds: Bounds,
    /// The property a counterexample breaks, and its steps (shortest).
    pub broken: Option<&'static str>,
    pub trace: Vec<Step>,
}

/// One step of a counterexample, as the trace prints it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Step {
    pub action: Action,
    /// What the step did, in words.
    pub text: String,
    /// The tick it happened at.
    pub at: u8,
}

/// Each broken property's model (the property in it) and shortest
/// counterexample (its path of states and actions), the most states one run
/// explored, and the time all took.
pub type Explored = (Vec<(Sale, Vec<(World, Option<Action>)>)>, usize, Duration);

/// Checks `protocol` (with `mutation`) within `bounds`, one run per
/// property of `properties`: the shortest counterexample (or example) of
/// each, and the most states one run explored (all of them when it found
/// none).
pub fn explore(
    protocol: Protocol,
    bounds: Bounds,
    mutation: Mutation,
    properties: &[&'static str],
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
        let checker = sale.checker().threads(1).spawn_bfs().join();
        states = states.max(checker.unique_state_count());
        if let Some(path) = checker.discovery(property) {
            found.push((sale, path.into_vec()));
        }
    }
    (found, states, started.elapsed())
}

/// The properties a cell's verdict rests on: no unit sold twice always; a
/// SKU left stuck only where a holder can die; a sale at all where nodes
/// are down and nothing else happens, or after Redis came back; one sale
/// per id where buyers retry; the orders where there are orders.
fn properties_of(bounds: Bounds) -> Vec<&'static str> {
    let mut properties = vec![SAFETY];
    if bounds.crashes > 0 {
        properties.push(STUCK);
    }
    if node_fault_only(bounds) || bounds.outages > 0 {
        properties.push(SELLS);
    }
    if bounds.one_request || bounds.cutoffs > 0 {
        properties.push(ONE_SALE);
    }
    if bounds.orders.is_some() {
        properties.extend([ORDERED_ONCE, ORDERS_KEPT]);
    }
    properties
}

/// Redlock's nodes down, and no other fault: does the lock still sell?
fn node_fault_only(bounds: Bounds) -> bool {
    bounds.nodes_down > 0 && bounds.pauses == 0
}

/// The verdict of one cell, or `None` when the matrix has no such cell
/// (the scenario does not apply to the variant).
pub fn check(variant: Variant, scenario: Scenario) -> Option<Verdict> {
    let claim = scenario.claim(variant);
    if !claim.applies() {
        return None;
    }
    let protocol = Protocol::of(variant);
    let bounds = bounds(scenario, protocol);
    let (found, states, took) = explore(
        protocol,
        bounds,
        Mutation::default(),
        &properties_of(bounds),
    );
    let by = |name| found.iter().find(|(sale, _)| sale.property == name);
    let (behaviour, broken) = if let Some(found) = by(SAFETY).or(by(ONE_SALE)).or(by(ORDERED_ONCE))
    {
        (Behaviour::Oversells, Some(found))
    } else if let Some(found) = by(ORDERS_KEPT) {
        (Behaviour::LosesUnits, Some(found))
    } else if let Some(found) = by(STUCK) {
        (Behaviour::Deadlock, Some(found))
    } else if bounds.orders.is_some() {
        (Behaviour::Safe, None)
    } else if bounds.outages > 0 {
        // Never selling again after Redis came back: stuck.
        match by(SELLS) {
            Some(_) => (Behaviour::Recovers, None),
            None => (Behaviour::Deadlock, None),
        }
    } else if bounds.crashes > 0 {
        (Behaviour::Frees, None)
    } else if node_fault_only(bounds) {
        match by(SELLS) {
            Some(_) => (Behaviour::KeepsSelling, None),
            None => (Behaviour::Busy, None),
        }
    } else {
        (Behaviour::Safe, None)
    };
    Some(Verdict {
        variant: variant.name(),
        scenario: scenario.name(),
        claim: claim.behaviour.name(),
        model: behaviour.name(),
        agrees: behaviour == claim.behaviour,
        states,
        millis: took.as_millis() as u64,
        bounds,
        broken: broken.map(|(sale, _)| sale.property),
        trace: broken
            .map(|(sale, path)| steps(sale, path))
            .unwrap_or_default(),
    })
}

impl Verdict {
    /// The verdict in a few words, as the lab's report and the lessons
    /// show it beside the live one: `oversells: counterexample in 14 steps`.
    pub fn summary(&self) -> String {
        match self.broken {
            Some(_) => format!(
                "{}: counterexample in {} steps",
                self.model,
                self.trace.len()
            ),
            None => format!("{}: no violation in {} states", self.model, self.states),
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
mod tests;
