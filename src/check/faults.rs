//! The lab's faults as steps of the model: when each may strike, and what
//! it does to the buyers and the store; and time passing (leases running
//! out, frozen processes waking, watchdogs renewing). Each scenario's bounds say how many
//! of each may happen ([`super::model::Bounds`]).

use super::model::{Action, At, Node, Outage, Replica, Sale, World, script};
use super::order::Status;
use super::protocol::Program;

impl Sale {
    /// The faults that may strike now.
    pub(super) fn fault_actions(&self, w: &World, actions: &mut Vec<Action>) {
        let b = self.bounds;
        for (n, buyer) in w.buyers.iter().enumerate() {
            let n = n as u8;
            let holder = w.lock.is_some_and(|lock| lock.holder == n);
            if buyer.frozen_until.is_some() {
                // Under a frozen holder: its lock forgotten, Redlock's nodes restarting.
                if w.vanishes < b.vanishes && holder {
                    actions.push(Action::Vanish);
                }
                if w.restarts < b.restarts {
                    actions.extend((0..b.nodes).map(Action::Restart));
                }
                continue;
            }
            if buyer.queued {
                // Redis wakes and runs the script a cut-off call left queued.
                actions.push(Action::Deliver(n));
            }
            let at = buyer.pc.at();
            if !buyer.live() || at == At::Done {
                continue;
            }
            // A script's call (the lua family's) cut off by a paused Redis.
            if w.cutoffs < b.cutoffs
                && at == At::Start
                && self.protocol.program == Program::Script
                && w.redis == Outage::Up
            {
                actions.push(Action::CutOff(n));
            }
            let in_work = at == At::Work;
            if w.crashes < b.crashes && (!b.crash_only_in_work || in_work) {
                actions.push(Action::Crash(n));
            }
            // A freeze anywhere in a section, an acquire's round included.
            if w.pauses < b.pauses && at.in_section() {
                actions.push(Action::Freeze(n));
            }
            // The lock deleted at any moment its holder is in its section,
            // or only while it works, before its watchdog's next renewal.
            let vanish_now = match b.vanish_early {
                true => in_work && w.now < buyer.work_until,
                false => at.in_section(),
            };
            if w.vanishes < b.vanishes && vanish_now && holder {
                actions.push(Action::Vanish);
            }
        }
        // Redlock's nodes that are down come back (empty), one at a time.
        if w.restarts < b.restarts {
            for (k, node) in w.nodes.iter().enumerate() {
                if !node.up {
                    actions.push(Action::Restart(k as u8));
                }
            }
        }
        match w.redis {
            Outage::Up if w.outages < b.outages => actions.push(Action::RedisDown),
            Outage::Down => actions.push(Action::RedisBack),
            _ => {}
        }
        // The buyers whose next command is a commit: its answer may be lost.
        let committing = w
            .buyers
            .iter()
            .enumerate()
            .filter(|(_, buyer)| buyer.live() && self.commits_next(buyer.pc.at()))
            .map(|(n, _)| n as u8);
        if w.db_crashes < b.db_crashes {
            actions.push(Action::DatabaseCrash(None));
            // A crash that loses the answer of a commit that made it.
            actions.extend(committing.clone().map(|n| Action::DatabaseCrash(Some(n))));
        }
        if w.answers_lost < b.lost_answers {
            actions.extend(committing.map(Action::AnswerLost));
        }
        self.order_actions(w, actions);
        if w.failovers < b.failovers {
            if !w.replication_held {
                // Held back at any moment, or only while nobody holds the
                // lock (before it can reach the replica).
                if !b.hold_early || w.lock.is_none() {
                    actions.push(Action::HoldReplication);
                }
            } else {
                // The master dies, and its replica is promoted.
                actions.push(Action::Failover);
            }
        }
    }

    /// Whether each fault the bounds let strike has struck at least once
    /// by `w` (so, where none may, always): a witness sells after them,
    /// through the scenario's fault, not beside it. The failover is the
    /// fault, not replication held back before it; the end of a fault
    /// (Redis back, a queued script run, PostgreSQL started) is not one;
    /// Redlock's nodes down from the start and a clock ahead are there
    /// from the first step, and late renewals and slow votes are time.
    pub(super) fn all_struck(&self, w: &World) -> bool {
        let b = self.bounds;
        let o = b.orders.unwrap_or_default();
        let p = &w.pipeline;
        let expired = p
            .orders
            .iter()
            .any(|order| matches!(order.status, Status::Expired | Status::Recorded));
        [
            (b.crashes, w.crashes),
            (b.pauses, w.pauses),
            (b.vanishes, w.vanishes),
            (b.restarts, w.restarts),
            (b.failovers, w.failovers),
            (b.outages, w.outages),
            (b.cutoffs, w.cutoffs),
            (b.db_crashes, w.db_crashes),
            (b.lost_answers, w.answers_lost),
            (o.worker_crashes, p.worker_crashes),
            (o.postgres_stops, p.postgres_stops),
            (o.data_losses, p.data_losses),
            (u8::from(o.reservations), u8::from(expired)),
        ]
        .iter()
        .all(|&(may, struck)| may == 0 || struck > 0)
    }

    /// `fault` strikes.
    pub(super) fn strike(&self, w: &mut World, fault: Action) {
        match fault {
            Action::Crash(n) => {
                w.crashes += 1;
                if self.holds_lock(w, n) && w.holder_crash.is_none() {
                    w.holder_crash = Some(w.now);
                }
                w.buyers[usize::from(n)].crashed = true;
                // A process's local mutex dies with it.
                self.free_mutex(w, n);
            }
            Action::Freeze(n) => {
                w.pauses += 1;
                let ticks = match self.bounds.freeze {
                    0 => self.bounds.lease + 1,
                    ticks => ticks,
                };
                w.buyers[usize::from(n)].frozen_until = Some(w.now + ticks);
            }
            Action::Restart(k) => {
                w.restarts += 1;
                w.nodes[usize::from(k)] = Node {
                    up: true,
                    lock: None,
                };
            }
            Action::Vanish => {
                w.vanishes += 1;
                w.lock = None;
            }
            Action::HoldReplication => w.replication_held = true,
            Action::Failover => {
                w.failovers += 1;
                // The old master comes back as the new one's replica:
                // replication runs again.
                w.replication_held = false;
                // A store that acknowledges a write once a majority has it
                // (etcd, ZooKeeper) loses nothing it acknowledged.
                if let Some(replica) = w.replica.filter(|_| !self.protocol.consensus) {
                    w.stock = replica.stock;
                    w.lock = replica.lock;
                    w.fence = replica.fence;
                    w.seen = replica.seen;
                }
            }
            Action::RedisDown => {
                w.outages += 1;
                w.redis = Outage::Down;
                // The outage outlasts a section's next command: each buyer
                // about to send one is answered 503 (its lock is lost with
                // Redis). A buyer in its business work sends none: it lives
                // on, and its write meets the SKU's new epoch.
                for n in 0..self.bounds.buyers {
                    let at = w.buyers[usize::from(n)].pc.at();
                    if !matches!(at, At::Start | At::Done | At::Work) {
                        self.fail(w, n);
                    }
                }
            }
            Action::RedisBack => {
                w.redis = Outage::Back;
                self.reset(w);
            }
            Action::CutOff(n) => {
                w.cutoffs += 1;
                let buyer = &mut w.buyers[usize::from(n)];
                buyer.queued = true;
                buyer.pc = script::Pc::Retry.into();
            }
            Action::Deliver(n) => {
                w.buyers[usize::from(n)].queued = false;
                self.script(w, n);
            }
            Action::AnswerLost(n) => {
                self.lose_answer(w, n);
                w.answers_lost += 1;
            }
            Action::DatabaseCrash(lost) => {
                let struck = lost.is_some() || w.buyers.iter().any(|b| b.live() && b.holds_mutex);
                if let Some(n) = lost {
                    self.lose_answer(w, n);
                }
                w.db_crashes += 1;
                w.crash_struck = struck;
                // Every other open transaction is rolled back, its lock
                // with it: its buyer is told 503 and asks again.
                for n in 0..self.bounds.buyers {
                    let buyer = &w.buyers[usize::from(n)];
                    if buyer.live() && buyer.holds_mutex {
                        self.free_mutex(w, n);
                        let pc = w.buyers[usize::from(n)].pc;
                        w.buyers[usize::from(n)].pc = pc.retry();
                    }
                }
            }
            Action::Step(_) | Action::Tick | Action::LateTick(_) | Action::Order(_) => {}
        }
    }

    /// While replication runs, the replica has what the master has.
    pub(super) fn replicate(&self, w: &mut World) {
        if self.bounds.failovers > 0 && !w.replication_held {
            w.replica = Some(Replica {
                stock: w.stock,
                lock: w.lock,
                fence: w.fence,
                seen: w.seen,
            });
        }
    }

    /// Buyer `n`'s statement or commit is run and committed, and its answer
    /// lost: it asks again with its request id.
    fn lose_answer(&self, w: &mut World, n: u8) {
        let i = usize::from(n);
        let pc = w.buyers[i].pc;
        if pc.step(self, w, n).is_some() {
            w.buyers[i].pc = pc.retry();
        }
    }

    /// Whether a buyer here sends a commit next: a statement of the
    /// database's atomic writes (or its retry), a transaction's commit,
    /// `redis-then-pg`'s version-checked write.
    fn commits_next(&self, at: At) -> bool {
        match self.protocol.program {
            Program::Script => matches!(at, At::Start | At::Retry),
            Program::Update => matches!(at, At::Write | At::After),
            Program::RedisThenPg | Program::Optimistic => at == At::Write,
            _ => self.protocol.database_lock() && at == At::Write,
        }
    }

    /// Whether buyer `n` holds a lock: the key, or Redlock's majority.
    pub(super) fn holds_lock(&self, w: &World, n: u8) -> bool {
        let nodes = w
            .nodes
            .iter()
            .filter(|node| node.lock.is_some_and(|lock| lock.owner == Some(n)))
            .count() as u8;
        // The database's lock is its transaction's (the one mutex).
        let transaction = self.protocol.database_lock() && w.buyers[usize::from(n)].holds_mutex;
        w.lock.is_some_and(|lock| lock.holder == n)
            || (nodes > 0 && nodes >= self.majority())
            || transaction
    }

    /// Whether time may pass: something waits for it, and no live buyer is
    /// in the middle of a section outside its business work (a section
    /// runs within its lease unless a scenario makes it slow).
    pub(super) fn time_may_pass(&self, w: &World) -> bool {
        if w.now >= self.bounds.horizon {
            return false;
        }
        let mid_section = w.buyers.iter().any(|b| {
            b.live()
                && !matches!(b.pc.at(), At::Claim | At::Start | At::Done | At::Round)
                && !(b.pc.at() == At::Work && w.now < b.work_until)
        });
        // A lock left by a holder that is dead or gone (one restored by a
        // failover, one a losing GETSET wrote) waits for its lease or its
        // expiry time; a Redlock round waits for a slow node's answer.
        let gone = |holder: u8| {
            let b = &w.buyers[usize::from(holder)];
            b.crashed || b.pc.is_done()
        };
        let orphaned = w
            .lock
            .is_some_and(|lock| (lock.expires.is_some() || lock.value > 0) && gone(lock.holder))
            || w.nodes.iter().any(|node| {
                node.lock
                    .is_some_and(|lock| lock.expires.is_some() && gone(lock.holder))
            });
        let waited_for = w.buyers.iter().any(|b| {
            (b.live() && b.pc.at() == At::Work && w.now < b.work_until) || b.frozen_until.is_some()
        }) || orphaned;
        let slow_vote = w.slow < self.bounds.slow_votes && self.voting(w);
        (waited_for || slow_vote) && !mid_section
    }

    /// Whether a live buyer is in a Redlock round.
    fn voting(&self, w: &World) -> bool {
        w.buyers.iter().any(|b| b.live() && b.pc.at() == At::Round)
    }

    /// Whether the only thing time may pass for is a slow node's answer.
    pub(super) fn only_slow_votes(&self, w: &World) -> bool {
        let mut without = self.bounds;
        without.slow_votes = 0;
        let sale = Sale {
            bounds: without,
            ..*self
        };
        self.voting(w) && !sale.time_may_pass(w)
    }

    /// A tick: leases that ran out go, frozen processes may wake, and each
    /// live holder's watchdog renews its lease or learns it is gone (`late`:
    /// that buyer's renewal comes late, and does neither).
    pub(super) fn tick(&self, w: &mut World, late: Option<u8>) {
        w.now += 1;
        let now = w.now;
        let lease = self.bounds.lease;
        for node in &mut w.nodes {
            if node
                .lock
                .and_then(|lock| lock.expires)
                .is_some_and(|at| at <= now)
            {
                node.lock = None;
            }
        }
        if w.lock
            .and_then(|lock| lock.expires)
            .is_some_and(|at| at <= now)
        {
            w.lock = None;
        }
        for n in 0..w.buyers.len() {
            let buyer = &w.buyers[n];
            if let Some(until) = buyer.frozen_until
                && now >= until
            {
                w.buyers[n].frozen_until = None;
            }
            let buyer = &w.buyers[n];
            let renews = self.protocol.watchdog()
                && !self.mutation.no_renewal
                && late != Some(n as u8)
                && buyer.live()
                && buyer.pc.renewing()
                && w.redis != Outage::Down;
            if renews && self.bounds.nodes > 0 {
                // Redlock's watchdog extends on every node; a majority or lost.
                let mut kept = 0;
                for node in w.nodes.iter_mut().filter(|node| node.up) {
                    if let Some(lock) = &mut node.lock
                        && lock.owner == Some(n as u8)
                    {
                        lock.expires = Some(now + lease);
                        kept += 1;
                    }
                }
                if kept < self.majority() {
                    w.buyers[n].lost = true;
                } else {
                    w.buyers[n].renewed = now;
                }
            } else if renews {
                match &mut w.lock {
                    Some(lock) if lock.owner == Some(n as u8) => {
                        lock.expires = Some(now + lease);
                        w.buyers[n].renewed = now;
                    }
                    _ => w.buyers[n].lost = true,
                }
            }
        }
    }
}
