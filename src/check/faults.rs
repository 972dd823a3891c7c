//! The lab's faults as steps of the model: when each may strike, and what
//! it does to the buyers and the store; and time passing (leases running
//! out, frozen processes waking, watchdogs renewing). Each scenario's bounds say how many
//! of each may happen ([`super::model::Bounds`]).

use super::model::{Action, Node, Outage, Pc, Replica, Sale, World};

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
            if !buyer.live() || buyer.pc == Pc::Done {
                continue;
            }
            if w.cutoffs < b.cutoffs && buyer.pc == Pc::Acquire && w.redis == Outage::Up {
                actions.push(Action::CutOff(n));
            }
            let in_work = buyer.pc == Pc::Work;
            if w.crashes < b.crashes && (!b.crash_only_in_work || in_work) {
                actions.push(Action::Crash(n));
            }
            if w.pauses < b.pauses && buyer.pc == Pc::Write {
                actions.push(Action::Freeze(n));
            }
            let working = in_work && w.now < buyer.work_until;
            if w.vanishes < b.vanishes && working && holder {
                actions.push(Action::Vanish);
            }
        }
        match w.redis {
            Outage::Up if w.outages < b.outages => actions.push(Action::RedisDown),
            Outage::Down => actions.push(Action::RedisBack),
            _ => {}
        }
        self.order_actions(w, actions);
        if w.failovers < b.failovers {
            if !w.replication_held {
                actions.push(Action::HoldReplication);
            } else if w.lock.is_some() {
                // The master dies under a holder.
                actions.push(Action::Failover);
            }
        }
    }

    /// `fault` strikes.
    pub(super) fn strike(&self, w: &mut World, fault: Action) {
        match fault {
            Action::Crash(n) => {
                w.crashes += 1;
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
                // in one is answered 503 (its lock is lost with Redis).
                for n in 0..self.bounds.buyers {
                    let pc = w.buyers[usize::from(n)].pc;
                    if !matches!(pc, Pc::Acquire | Pc::Done) {
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
                buyer.pc = Pc::Retry;
            }
            Action::Deliver(n) => {
                w.buyers[usize::from(n)].queued = false;
                self.script(w, n);
            }
            Action::Step(_) | Action::Tick | Action::Order(_) => {}
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

    /// Whether time may pass: something waits for it, and no live buyer is
    /// in the middle of a section outside its business work (a section
    /// runs within its lease unless a scenario makes it slow).
    pub(super) fn time_may_pass(&self, w: &World) -> bool {
        if w.now >= self.bounds.horizon {
            return false;
        }
        let mid_section = w.buyers.iter().any(|b| {
            b.live()
                && !matches!(b.pc, Pc::Acquire | Pc::Done)
                && !(b.pc == Pc::Work && w.now < b.work_until)
        });
        let waited_for = w.buyers.iter().any(|b| {
            (b.live() && b.pc == Pc::Work && w.now < b.work_until) || b.frozen_until.is_some()
        }) || (w.crashes > 0 && w.lock.is_some());
        waited_for && !mid_section
    }

    pub(super) fn tick(&self, w: &mut World) {
        w.now += 1;
        let now = w.now;
        let lease = self.bounds.lease;
        for n in 0..w.buyers.len() {
            let buyer = &w.buyers[n];
            if let Some(until) = buyer.frozen_until
                && now >= until
            {
                w.buyers[n].frozen_until = None;
            }
            let buyer = &w.buyers[n];
            // A live holder's watchdog renews its own lock, or learns it is gone.
            let renews = self.protocol.watchdog
                && !self.mutation.no_renewal
                && buyer.live()
                && matches!(
                    buyer.pc,
                    Pc::Token | Pc::Read | Pc::Work | Pc::Check | Pc::Write
                );
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
                }
            } else if renews {
                match &mut w.lock {
                    Some(lock) if lock.owner == Some(n as u8) => lock.expires = Some(now + lease),
                    _ => w.buyers[n].lost = true,
                }
            }
        }
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
    }
}
