//! Gates: scheduled requests held at named points of the real code and
//! let go in the order a scheduler chooses, across two instances sharing
//! one Redis. A race decided by the schedule, not by timing.
//!
//! This file: the driver of a schedule and its buyers; `race.rs`: races
//! decided by a schedule; `runs.rs`: a run abandoned, and one refused;
//! `lock_gates.rs`: the gates of particular locks (Redlock's votes, a
//! watchdog's renewal, the queue locks).

use std::time::Duration;

use serde_json::Value;
use stocklock::gate::{Arrival, Scheduler, is_note};
use tokio::task::JoinHandle;

use crate::helpers::InProcess;

mod lock_gates;
mod race;
mod runs;

/// How long a test waits for an arrival before it calls the run broken.
const ARRIVAL: Duration = Duration::from_secs(10);

/// A scheduler that waits for one buyer's arrival at one gate, keeping
/// the other buyers' arrivals for later.
struct Driver {
    scheduler: Scheduler,
    heard: Vec<Arrival>,
}

impl Driver {
    async fn start(url: &str, run: &str) -> Driver {
        Driver {
            scheduler: Scheduler::start(url, run).await.unwrap(),
            heard: Vec::new(),
        }
    }

    /// Waits until `buyer` arrives somewhere; its arrival.
    async fn arrival_of(&mut self, buyer: &str) -> Arrival {
        loop {
            // A note that the buyer waits for a lock is no gate: kept, skipped.
            let at = self
                .heard
                .iter()
                .position(|a| a.buyer == buyer && !is_note(&a.gate));
            if let Some(at) = at {
                return self.heard.remove(at);
            }
            let arrival = self.scheduler.next(ARRIVAL).await.unwrap();
            let arrival =
                arrival.unwrap_or_else(|| panic!("{buyer} arrived nowhere within {ARRIVAL:?}"));
            self.heard.push(arrival);
        }
    }

    /// Waits until `buyer` arrives somewhere; its gate (it waits there).
    async fn next_of(&mut self, buyer: &str) -> String {
        let arrival = self.arrival_of(buyer).await;
        self.heard.insert(0, arrival.clone());
        arrival.gate
    }

    /// `buyer` must arrive at `gate` next; it is let go.
    async fn pass(&mut self, buyer: &str, gate: &str) {
        let arrival = self.arrival_of(buyer).await;
        assert_eq!(
            arrival.gate, gate,
            "{buyer} arrived at {}, not {gate}",
            arrival.gate
        );
        self.scheduler.release(&arrival).await.unwrap();
    }

    /// `buyer` goes through `gates`, in order, each let go at once.
    async fn through(&mut self, buyer: &str, gates: &[&str]) {
        for gate in gates {
            self.pass(buyer, gate).await;
        }
    }
}

/// Buyer `buyer` of run `run` on `instance`, as a task.
fn buyer(instance: &InProcess, variant: &str, run: &str, buyer: &str) -> JoinHandle<(u16, Value)> {
    let instance = instance.clone();
    let uri = format!("/deductStock/{variant}?sku={variant}&schedule={run}:{buyer}");
    tokio::spawn(async move {
        let (status, body) = instance.get(&uri).await;
        (status.as_u16(), body)
    })
}

const SECTION: [&str; 5] = [
    "after_acquire",
    "after_read",
    "before_check",
    "before_write",
    "before_release",
];
