//! The model: buyers running a variant's protocol, step by step, against
//! an abstract store whose commands (and scripts) are atomic, with the
//! lab's faults as steps that may happen between any two others.
//!
//! A buyer is a program counter and what it remembers; one [`Action`]
//! moves one buyer by one store command (a script is one command: Redis
//! runs it to its end), lets a tick of time pass, or strikes a fault. The
//! checker tries every order of those actions up to the [`Bounds`].
//!
//! Each protocol is a file of its own, read as a spec: its program
//! counter, and its step function with each step's guard beside its
//! effect ([`none`], [`local_mutex`], [`setnx`], [`setnx_expiry`],
//! [`token`], [`lease`] for `watchdog`, `fenced`, `etcd` and `zookeeper`,
//! [`redlock`], [`script`] for the `lua` family, [`update`] for
//! `pg-update`'s conditional UPDATE, [`optimistic`] for `pg-optimistic`'s
//! version-checked write, [`redis_then_pg`] for Redis's pre-decrement
//! before the database's optimistic sale, [`transaction`] for the
//! database's locks, and [`batch`] for `pg-batch`'s transaction). The commands they
//! share (the claim, the read, the write, the watchdog's word, letting go)
//! are in `section`, as `crate::section` shares them in the code.
//!
//! Time is ticks. A lease lasts [`Bounds::lease`] ticks, and a watchdog
//! renews its holder's lease on every tick (the real one renews every
//! lease/3: a tick stands for that period), unless a scenario makes a
//! renewal late ([`Action::LateTick`]). On a tick a lease that ran out goes
//! first, then the renewals run: a renewal that comes after its lease ran
//! out finds the lock gone. Time passes only while something waits for it
//! (a buyer's business work, a frozen process, a lock whose holder is dead
//! or gone, a Redlock node answering slowly): a section with no work runs
//! within its lease, as it does in the lab, so that a lease runs out only
//! where a scenario makes it.

use std::hash::Hash;

use super::order::{OrderFaults, OrderStep, Pipeline};
use super::protocol::Protocol;

mod mutation;
mod program;
mod section;
mod steps;

pub mod batch;
pub mod lease;
pub mod local_mutex;
pub mod none;
pub mod optimistic;
pub mod redis_then_pg;
pub mod redlock;
pub mod script;
pub mod setnx;
pub mod setnx_expiry;
pub mod token;
pub mod transaction;
pub mod update;

pub use mutation::Mutation;
pub use program::Pc;
pub use steps::At;

/// What may happen in a scenario, and how many buyers and units there are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Bounds {
    pub buyers: u8,
    pub stock: u8,
    /// Ticks a lease lasts.
    pub lease: u8,
    /// Ticks of business work between the read and the write.
    pub work: u8,
    /// No tick after this one.
    pub horizon: u8,
    /// All buyers in one process (one local mutex for all).
    pub one_process: bool,
    /// Crashes: anywhere, or only during the business work.
    pub crashes: u8,
    pub crash_only_in_work: bool,
    /// Freezes of a whole process, right before its write, past its lease.
    pub pauses: u8,
    /// Deletions of the lock key under its holder: at any moment of its
    /// section, or (`vanish_early`) only while it works, before its
    /// watchdog's next renewal.
    pub vanishes: u8,
    pub vanish_early: bool,
    /// Ticks on which one holder's watchdog renewal comes late: it neither
    /// renews nor learns anything on that tick.
    pub late_renewals: u8,
    /// Ticks that may pass while a Redlock round waits for a slow node.
    pub slow_votes: u8,
    /// How far ahead the last buyer's clock runs, in ticks.
    pub skew: u8,
    /// Ticks a freeze lasts (0: the lease and one more).
    pub freeze: u8,
    /// Redlock's nodes (0: one store), how many are down from the start,
    /// and how many may restart empty while a holder is frozen.
    pub nodes: u8,
    pub nodes_down: u8,
    pub restarts: u8,
    /// Failovers of the lock's store: replication held back once, then the
    /// replica promoted (the store's state as it last replicated).
    pub failovers: u8,
    /// The holder asks `WAIT` for a replica after taking its lock.
    pub wait_replicas: bool,
    /// Replication is held back only while nobody holds the lock (before
    /// the lock can reach the replica); otherwise at any moment.
    pub hold_early: bool,
    /// Every buyer is a retry of one request id.
    pub one_request: bool,
    /// Redis stops (each call fails: a 503) and comes back empty; the SKU
    /// is then reset.
    pub outages: u8,
    /// Calls cut off by a paused Redis: the buyer is told `unknown` and
    /// retries its own request id; its script runs when Redis wakes.
    pub cutoffs: u8,
    /// Crashes of the database that keeps the stock ([`Action::DatabaseCrash`]):
    /// each buyer retries its own request id.
    pub db_crashes: u8,
    /// Answers of the database's commits lost on their way back
    /// ([`Action::AnswerLost`]): each buyer retries its own request id.
    pub lost_answers: u8,
    /// The order pipeline and its faults (`None`: no orders).
    pub orders: Option<OrderFaults>,
}

impl Bounds {
    /// Whether the database that keeps the stock fails under the buyers:
    /// a crash, or a commit's answer lost (the lab plays these; the
    /// explorer and step mode do not strike them).
    pub fn database_faults(&self) -> bool {
        self.db_crashes > 0 || self.lost_answers > 0
    }
}

/// The lock key as the store holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LockKey {
    /// The buyer whose token it holds (`None`: a value with no owner).
    pub owner: Option<u8>,
    /// The buyer that wrote it (the model's bookkeeping: the store of
    /// `setnx` cannot tell).
    pub holder: u8,
    /// The tick its TTL runs out (`None`: no TTL).
    pub expires: Option<u8>,
    /// `setnx-expiry`: the expiry time written in the value, by the
    /// writer's clock.
    pub value: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Buyer {
    pub pc: Pc,
    /// The stock it read (the unit it will sell).
    pub read: u8,
    /// The tick its work ends.
    pub work_until: u8,
    /// Its fencing token (0: none).
    pub token: u8,
    /// The tick of its lock's grant or last renewal: it counts on the lock
    /// until a lease after it (its local deadline).
    pub renewed: u8,
    /// Redlock: the tick its round of votes began (its validity runs from it).
    pub started: u8,
    /// The SKU's epoch its read saw (a reset starts a new one).
    pub read_epoch: u8,
    /// `setnx-expiry`: the expiry time it read in the lock.
    pub seen_value: u8,
    /// Its watchdog found the lock gone.
    pub lost: bool,
    pub crashed: bool,
    /// Frozen until this tick.
    pub frozen_until: Option<u8>,
    /// Holds its process's local mutex.
    pub holds_mutex: bool,
    /// Redlock: the nodes it asked so far, and those that said yes (bits).
    pub asked: u8,
    pub votes: u8,
    /// Its cut-off call's script waits in a paused Redis.
    pub queued: bool,
    /// `pg-optimistic`: the reads of its attempt so far.
    pub tries: u8,
}

impl Buyer {
    pub fn live(&self) -> bool {
        !self.crashed && self.frozen_until.is_none()
    }
}

/// The whole system at one moment.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct World {
    pub now: u8,
    pub stock: u8,
    /// How many times each unit was sold (unit u at u - 1).
    pub sold: Vec<u8>,
    pub lock: Option<LockKey>,
    /// The fence counter (INCR) and the highest token the ledger admitted.
    pub fence: u8,
    pub seen: u8,
    /// Local mutexes: the buyer holding each process's, if any.
    pub mutexes: Vec<Option<u8>>,
    pub buyers: Vec<Buyer>,
    /// The SKU's epoch: one reset's life of its stock.
    pub epoch: u8,
    /// The tick a lock's holder died, and whether another buyer sold
    /// within a lease and a tick after it (the lock freed).
    pub holder_crash: Option<u8>,
    pub freed: bool,
    /// A sale while fewer than a majority of Redlock's nodes were up.
    pub sold_while_down: bool,
    /// Late renewals so far, and ticks spent on slow nodes.
    pub lates: u8,
    pub slow: u8,
    /// Faults struck so far.
    pub crashes: u8,
    pub pauses: u8,
    pub vanishes: u8,
    /// A release deleted a lock its buyer did not own.
    pub freed_anothers: bool,
    /// Redlock's nodes.
    pub nodes: Vec<Node>,
    pub restarts: u8,
    /// The store as its replica has it (while replication runs: as the
    /// master has it), whether replication is held back, and failovers.
    pub replica: Option<Replica>,
    pub replication_held: bool,
    pub failovers: u8,
    /// The request id's record ([`Bounds::one_request`]).
    pub request: Request,
    /// Whether Redis is up, down, or back empty; outages so far.
    pub redis: Outage,
    pub outages: u8,
    /// Calls cut off so far.
    pub cutoffs: u8,
    /// Crashes of the database so far; whether one ended an attempt (its
    /// transaction rolled back, or its answer lost), and whether a unit
    /// sold since such a one.
    pub db_crashes: u8,
    pub crash_struck: bool,
    pub sold_since_crash: bool,
    /// A unit sold once each fault the scenario may strike had struck
    /// (`Sale::all_struck`): what a witness of a verdict
    /// with no counterexample sells through, not beside.
    pub sold_after_faults: bool,
    /// Commits' answers lost so far.
    pub answers_lost: u8,
    /// The request ids the sale's script holds a record of (bits, by
    /// `Sale::script_id`).
    pub answered: u8,
    /// The units sold under each buyer's own request id (a script's, or a
    /// database transaction's with ids in play).
    pub script_sales: Vec<u8>,
    /// Units given back to the stock, sold first (bits: unit u at u - 1).
    pub returned: u8,
    pub pipeline: Pipeline,
    /// `redis-then-pg`: Redis's stock (`stock` is the database's), and
    /// whether a buyer was told sold out.
    pub redis_stock: u8,
    pub told_sold_out: bool,
}

/// Redis through an outage ([`Bounds::outages`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outage {
    Up,
    Down,
    /// Back, empty, and the SKU reset.
    Back,
}

/// A request id's record in the ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Request {
    None,
    /// The claim of the attempt under way, and the tick it was taken: it
    /// stands a lease, then a retry may take it over.
    Pending(u8, u8),
    /// Answered: retries are told the same answer, nothing sold again.
    Final,
}

/// What a replica holds of the store: what a failover brings back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Replica {
    pub stock: u8,
    pub lock: Option<LockKey>,
    pub fence: u8,
    pub seen: u8,
}

/// One of Redlock's independent servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    pub up: bool,
    pub lock: Option<LockKey>,
}

/// One step of the system.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Action {
    /// Buyer `n` runs its next command.
    Step(u8),
    /// A tick passes: TTLs run out, watchdogs renew, frozen processes may wake.
    Tick,
    /// A tick on which buyer `n`'s watchdog renewal comes late.
    LateTick(u8),
    /// Buyer `n`'s process dies.
    Crash(u8),
    /// Buyer `n`'s process freezes, anywhere in its section, past its lease.
    Freeze(u8),
    /// The lock key is deleted.
    Vanish,
    /// Redlock's node `k` restarts empty (or comes back, if it was down).
    Restart(u8),
    /// Replication to the lock store's replica stops (the relay frozen).
    HoldReplication,
    /// The master dies and its replica is promoted.
    Failover,
    /// Redis stops: each call fails.
    RedisDown,
    /// Redis comes back empty, and the SKU is reset.
    RedisBack,
    /// Buyer `n`'s call goes to a paused Redis: it is told `unknown`.
    CutOff(u8),
    /// Redis wakes and runs buyer `n`'s queued script.
    Deliver(u8),
    /// The database crashes and starts again on what it committed: every
    /// open transaction is rolled back (its buyer, told 503, asks again
    /// with its request id). `Some(n)`: buyer `n`'s statement or commit
    /// had reached it and committed, its answer lost in the crash (told
    /// `unknown`, it asks again).
    DatabaseCrash(Option<u8>),
    /// Buyer `n`'s statement or commit is run and committed by the
    /// database, and its answer lost on the way back (told `unknown`, it
    /// asks again with its request id).
    AnswerLost(u8),
    /// A step of the order pipeline.
    Order(OrderStep),
}

/// One variant's protocol under one scenario's bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sale {
    pub protocol: Protocol,
    pub bounds: Bounds,
    pub mutation: Mutation,
    /// The property checked.
    pub property: super::Property,
}

/// Whether one request id was sold at most once (all buyers retrying one).
pub fn one_sale_per_request(w: &World) -> bool {
    w.sold.iter().map(|&n| u32::from(n)).sum::<u32>() <= 1
}

/// Whether no unit was sold twice (and so never more than the stock).
pub fn sold_each_unit_once(w: &World) -> bool {
    w.sold.iter().all(|&times| times <= 1)
}

/// Whether the SKU is stuck: units left, and a lock with no TTL and no
/// expiry time in its value, written by a buyer now dead: nobody will ever
/// delete it, and nobody can take it over.
pub fn stuck(w: &World) -> bool {
    w.stock > 0
        && w.lock.is_some_and(|lock| {
            lock.expires.is_none() && lock.value == 0 && w.buyers[usize::from(lock.holder)].crashed
        })
}
