//! A step of a schedule: a release, or a fault struck.

/// One step of a schedule.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Choice {
    /// The buyer at this gate goes on.
    Release {
        buyer: String,
        gate: String,
    },
    /// The lock key is deleted.
    Vanish,
    /// The lock's lease runs out (the explorer makes it: PEXPIRE 1).
    Expire,
    /// A buyer is never let go again (its process as good as dead).
    Crash {
        buyer: String,
    },
    /// A holder's watchdog renews late: its lease runs out first, then
    /// the renewal finds the lock gone.
    Late {
        buyer: String,
    },
    /// A holder's whole process freezes where it waits: its watchdog
    /// renews nothing, and its lease may run out, until it is let go (it
    /// wakes, its watchdog renewing first).
    Freeze {
        buyer: String,
    },
    /// Redlock's node (0, 1, 2) restarts empty, or comes back if down.
    NodeRestart {
        node: u8,
    },
    /// A Redlock round waits a tick of the lease for a slow node.
    SlowVote,
    /// Redis pauses (`DEBUG SLEEP`) and the buyer's call goes into the
    /// pause: its instance stops waiting (1 s) and answers `unknown`; the
    /// call's script, queued, runs when Redis wakes.
    Cutoff {
        buyer: String,
    },
    /// A buyer told `unknown` asks again with its request id (a release:
    /// every such buyer asks again before the schedule ends).
    Retry {
        buyer: String,
    },
    /// Redis restarted empty under a working buyer, as the SKU sees it:
    /// its keys (the lock among them) gone and the SKU stocked again, a
    /// new epoch. (The outage's failed calls themselves are not played.)
    Restart,
    /// An order worker (named by its instance) takes a turn: it reads the
    /// stream, claiming the messages others left pending.
    Work {
        worker: String,
    },
    /// The worker that committed the buyer's order acks it.
    Ack {
        buyer: String,
        worker: String,
    },
    /// That worker dies instead, after its commit, before its ack.
    WorkerCrash {
        buyer: String,
        worker: String,
    },
    PostgresStop,
    PostgresStart,
    /// The buyer pays its reservation.
    Pay {
        buyer: String,
    },
    /// The buyer's reservation runs out, and an expiry pass cancels it.
    Overdue {
        buyer: String,
    },
    /// That pass gives the buyer's unit back.
    GiveBack {
        buyer: String,
    },
    /// Redis loses its data, as the SKU sees it: its keys (its order
    /// stream among them) gone, and the SKU reset.
    DataLoss,
    /// Replication to the lock's replica stops (what the master had so
    /// far reached it).
    HoldReplication,
    /// The lock's store fails over: Redis's master dies and its replica is
    /// promoted; etcd's or ZooKeeper's leader dies.
    Failover,
    /// The request id's claim runs out under its live holder (the explorer
    /// moves its deadline into the past): a retry may take it over, and
    /// the holder's write must find it lost. Each buyer told the id was
    /// in progress asks again once after it.
    ClaimRunsOut,
}

impl Choice {
    /// The fault this step strikes (its name in `--json`), `None` for a
    /// release.
    pub fn fault(&self) -> Option<&'static str> {
        Some(match self {
            Choice::Release { .. }
            | Choice::Retry { .. }
            | Choice::Work { .. }
            | Choice::Ack { .. }
            | Choice::PostgresStart
            | Choice::Pay { .. }
            | Choice::GiveBack { .. } => return None,
            Choice::Cutoff { .. } => "Cutoff",
            Choice::Vanish => "Vanish",
            Choice::Expire => "Expire",
            Choice::Crash { .. } => "Crash",
            Choice::Late { .. } => "Late",
            Choice::Freeze { .. } => "Freeze",
            Choice::NodeRestart { .. } => "NodeRestart",
            Choice::SlowVote => "SlowVote",
            Choice::Restart => "Restart",
            Choice::WorkerCrash { .. } => "WorkerCrash",
            Choice::PostgresStop => "PostgresStop",
            Choice::Overdue { .. } => "Overdue",
            Choice::DataLoss => "DataLoss",
            Choice::HoldReplication => "HoldReplication",
            Choice::Failover => "Failover",
            Choice::ClaimRunsOut => "ClaimRunsOut",
        })
    }
}
