//! Each scenario's bounds: how many buyers and units, and which faults may
//! strike where (printed with every verdict); and the bounds the command
//! line may set instead.

use super::model::Bounds;
use super::order::OrderFaults;
use super::protocol::{self, Protocol};
use crate::variants::Scenario;

/// The bounds of `scenario` for `protocol`.
pub fn bounds(scenario: Scenario, protocol: Protocol) -> Bounds {
    let redlock = protocol.program == protocol::Program::Redlock;
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
        vanish_early: false,
        late_renewals: 0,
        slow_votes: 0,
        skew: 0,
        freeze: 0,
        // Three nodes stand for Redlock's five: a majority of two.
        nodes: if redlock { 3 } else { 0 },
        nodes_down: 0,
        restarts: 0,
        failovers: 0,
        wait_replicas: false,
        hold_early: false,
        one_request: false,
        outages: 0,
        cutoffs: 0,
        db_crashes: 0,
        lost_answers: 0,
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
        // A Redlock round's nodes may answer slowly: a lease's worth of
        // ticks within its rounds (its validity is what this tests).
        Scenario::Race => Bounds {
            slow_votes: if redlock { base.lease } else { 0 },
            ..base
        },
        // The work outlives the lease; a watchdog's renewals may come late.
        Scenario::SlowBusiness => Bounds {
            work: 3,
            late_renewals: 2,
            ..base
        },
        Scenario::CrashAfterAcquire => Bounds { crashes: 1, ..base },
        // Frozen anywhere in its section (before its write is the worst
        // moment), past the lease.
        Scenario::PauseHolder => Bounds { pauses: 1, ..base },
        Scenario::KillInstance => Bounds {
            work: 1,
            crashes: 1,
            crash_only_in_work: true,
            ..base
        },
        // Deleted while its holder works, before its watchdog's next renewal.
        Scenario::LockVanishesEarly => Bounds {
            work: 1,
            vanishes: 1,
            vanish_early: true,
            ..base
        },
        // Deleted at any moment of its holder's section.
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
        // Two of three nodes down; they come back (empty) at any moment.
        Scenario::RedlockMajorityDown => Bounds {
            nodes_down: 2,
            restarts: 2,
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
        // Every buyer a retry of one request id, all at once; the first
        // attempt's work outlives its claim, which a retry takes over.
        Scenario::RetryStorm => Bounds {
            one_request: true,
            work: 3,
            ..base
        },
        // The master dies under a holder, its replica having missed the
        // writes since replication was held back.
        Scenario::Failover => Bounds {
            failovers: 1,
            ..base
        },
        // Replication held back before the lock reached the replica.
        Scenario::FailoverWaitEarly => Bounds {
            failovers: 1,
            wait_replicas: true,
            hold_early: true,
            ..base
        },
        // Held back at any moment: after WAIT saw the lock on the replica too.
        Scenario::FailoverWait => Bounds {
            failovers: 1,
            wait_replicas: true,
            ..base
        },
        // Redis stops under the buyers (one may be in its business work)
        // and comes back empty.
        Scenario::RedisRestart => Bounds {
            outages: 1,
            work: 1,
            ..base
        },
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
        // The database that keeps the stock crashes under the buyers, each
        // with a request id of its own, and starts again on its data.
        Scenario::PostgresRestart if protocol.database => Bounds {
            db_crashes: 1,
            ..base
        },
        // One commit's answer lost on its way back, each buyer with an id.
        Scenario::CommitAnswerLost => Bounds {
            lost_answers: 1,
            ..base
        },
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

/// Bounds set from the command line (`None`: the scenario's own).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    pub buyers: Option<u8>,
    pub stock: Option<u8>,
    pub lease: Option<u8>,
}

impl Limits {
    pub(super) fn apply(&self, bounds: Bounds) -> Bounds {
        Bounds {
            buyers: self.buyers.unwrap_or(bounds.buyers),
            stock: self.stock.unwrap_or(bounds.stock),
            lease: self.lease.unwrap_or(bounds.lease),
            ..bounds
        }
    }
}
