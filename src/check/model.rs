//! The model: buyers running a variant's protocol, step by step, against
//! an abstract store whose commands (and scripts) are atomic, with the
//! lab's faults as steps that may happen between any two others.
//!
//! A buyer is a program counter and what it remembers; one [`Action`]
//! moves one buyer by one store command (a script is one command: Redis
//! runs it to its end), lets a tick of time pass, or strikes a fault. The
//! checker tries every order of those actions up to the [`Bounds`].
//!
//! Time is ticks. A lease lasts [`Bounds::lease`] ticks, and a watchdog
//! renews its holder's lease on every tick, as the real one renews every
//! lease/3. Time passes only while something waits for it (a buyer's
//! business work, a frozen process, a dead holder's lock): a section with
//! no work runs within its lease, as it does in the lab, so that a lease
//! runs out only where a scenario makes it.

use std::hash::Hash;

use super::order::{OrderFaults, OrderStep, Pipeline};
use super::protocol::{Acquire, Protocol};

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
    /// Deletions of the lock key under a holder that is working.
    pub vanishes: u8,
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
    /// Every buyer is a retry of one request id.
    pub one_request: bool,
    /// Redis stops (each call fails: a 503) and comes back empty; the SKU
    /// is then reset.
    pub outages: u8,
    /// Calls cut off by a paused Redis: the buyer is told `unknown` and
    /// retries its own request id; its script runs when Redis wakes.
    pub cutoffs: u8,
    /// The order pipeline and its faults (`None`: no orders).
    pub orders: Option<OrderFaults>,
}

/// A variant's protocol, with a part of it possibly taken out (the
/// mutations the tests use to show the checker finds what that part prevents).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mutation {
    /// The fenced read and write admit any token.
    pub no_fence_check: bool,
    /// The owner-token release deletes the lock whoever holds it.
    pub plain_del_release: bool,
    /// The watchdog never renews.
    pub no_renewal: bool,
    /// Request ids are neither claimed nor checked by the write.
    pub no_request_claim: bool,
    /// The worker's insert writes a row even when the sale has one.
    pub no_on_conflict: bool,
    /// Giving a unit back does not record the sale's return first.
    pub no_give_back_once: bool,
}

/// Where a buyer is in its protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    Acquire,
    /// `setnx`: between SETNX and EXPIRE.
    Expire,
    /// `setnx-expiry`: the lock was there; read its expiry time next.
    ReadExpiry,
    /// `setnx-expiry`: it had passed by this buyer's clock; GETSET next.
    TakeOver,
    /// The fenced lock: INCR the fence for a token.
    Token,
    Read,
    Work,
    /// The watchdog's word: is the lock still held?
    Check,
    Write,
    Release,
    Done,
    /// Redlock: SET NX PX on the next node.
    Vote,
    /// Redlock: a majority, or let go of what it got and try again.
    Count,
    /// `WAIT` for one replica after taking the lock (`failover-wait`).
    WaitReplica,
    /// Claim the request id before anything else (the lock variants).
    Claim,
    /// Told `unknown` (its call cut off): ask again with its request id.
    Retry,
    /// `lua-then-queue`: XADD its sale's order message, after the script.
    Enqueue,
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
    /// The request ids the sale's script holds a record of (bits, by
    /// `Sale::script_id`).
    pub answered: u8,
    /// The units each buyer's script sold (with cut-off calls: under its
    /// own request id).
    pub script_sales: Vec<u8>,
    /// Units given back to the stock, sold first (bits: unit u at u - 1).
    pub returned: u8,
    pub pipeline: Pipeline,
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
    /// The claim of the attempt under way.
    Pending(u8),
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
    /// A tick passes: watchdogs renew, TTLs run out, frozen processes may wake.
    Tick,
    /// Buyer `n`'s process dies.
    Crash(u8),
    /// Buyer `n`'s process freezes, right before its write, past its lease.
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
    /// A step of the order pipeline.
    Order(OrderStep),
}

/// One variant's protocol under one scenario's bounds.
#[derive(Clone, Copy, Debug)]
pub struct Sale {
    pub protocol: Protocol,
    pub bounds: Bounds,
    pub mutation: Mutation,
    /// The property checked (see `super::properties`).
    pub property: &'static str,
}

impl Sale {
    pub(super) fn process_of(&self, buyer: u8) -> usize {
        if self.bounds.one_process {
            0
        } else {
            usize::from(buyer)
        }
    }

    /// Whether request ids are claimed and checked (every buyer retrying one).
    pub(super) fn claims_ids(&self) -> bool {
        self.bounds.one_request && !self.mutation.no_request_claim
    }

    /// Redlock's majority: more than half of all its nodes, up or not.
    pub(super) fn majority(&self) -> u8 {
        self.bounds.nodes / 2 + 1
    }

    /// A buyer's clock: the last one runs `skew` ahead.
    pub(super) fn clock(&self, world: &World, buyer: u8) -> u8 {
        if buyer + 1 == self.bounds.buyers {
            world.now + self.bounds.skew
        } else {
            world.now
        }
    }

    pub fn initial(&self) -> World {
        let b = self.bounds;
        let idle = Buyer {
            // The lock variants claim the request id first; a script checks it itself.
            pc: match self.claims_ids() && self.protocol.acquire != Acquire::Atomic {
                true => Pc::Claim,
                false => Pc::Acquire,
            },
            read: 0,
            work_until: 0,
            token: 0,
            seen_value: 0,
            lost: false,
            crashed: false,
            frozen_until: None,
            holds_mutex: false,
            asked: 0,
            votes: 0,
            queued: false,
        };
        World {
            now: 0,
            stock: b.stock,
            sold: vec![0; usize::from(b.stock)],
            lock: None,
            fence: 0,
            seen: 0,
            mutexes: vec![None; usize::from(b.buyers)],
            buyers: vec![idle; usize::from(b.buyers)],
            crashes: 0,
            pauses: 0,
            vanishes: 0,
            freed_anothers: false,
            nodes: (0..b.nodes)
                .map(|k| Node {
                    up: k < b.nodes - b.nodes_down,
                    lock: None,
                })
                .collect(),
            restarts: 0,
            replica: None,
            replication_held: false,
            failovers: 0,
            request: Request::None,
            redis: Outage::Up,
            outages: 0,
            cutoffs: 0,
            answered: 0,
            script_sales: vec![0; usize::from(b.buyers)],
            returned: 0,
            pipeline: Pipeline::default(),
        }
    }

    /// The lab's reset of the SKU after Redis came back empty: full stock,
    /// no lock, no fence, no record; the sales of the lost history are no
    /// longer the ledger's (they stay the pipeline's).
    pub(super) fn reset(&self, w: &mut World) {
        w.stock = self.bounds.stock;
        w.sold.fill(0);
        w.lock = None;
        w.fence = 0;
        w.seen = 0;
        w.request = Request::None;
        w.answered = 0;
        w.script_sales.fill(0);
        w.returned = 0;
    }

    pub fn actions(&self, w: &World, actions: &mut Vec<Action>) {
        for (n, buyer) in w.buyers.iter().enumerate() {
            let n = n as u8;
            if !buyer.live() || buyer.pc == Pc::Done {
                continue;
            }
            if self.can_step(w, n) {
                actions.push(Action::Step(n));
            }
        }
        self.fault_actions(w, actions);
        if self.time_may_pass(w) {
            actions.push(Action::Tick);
        }
    }

    /// Whether buyer `n` can run its next command now (a buyer waiting
    /// for a lock or its work cannot).
    fn can_step(&self, w: &World, n: u8) -> bool {
        let buyer = &w.buyers[usize::from(n)];
        match buyer.pc {
            Pc::Work => w.now >= buyer.work_until,
            Pc::Acquire => match self.protocol.acquire {
                Acquire::LocalMutex => w.mutexes[self.process_of(n)].is_none(),
                // A waiting lock (watchdog, fenced, etcd, zookeeper) waits
                // for the key to go; the others answer busy at once.
                Acquire::Waiting => w.lock.is_none(),
                _ => true,
            },
            Pc::Done => false,
            _ => true,
        }
    }

    pub fn next(&self, w: &World, action: Action) -> Option<World> {
        let mut w = w.clone();
        match action {
            Action::Step(n) => self.step(&mut w, n),
            Action::Tick => self.tick(&mut w),
            Action::Order(step) => self.order_step(&mut w, step),
            fault => self.strike(&mut w, fault),
        }
        self.replicate(&mut w);
        Some(w)
    }
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
