//! The lab's faults as steps of the model: when each may strike, and what
//! it does to the buyers and the store. Each scenario's bounds say how many
//! of each may happen ([`super::model::Bounds`]).

use super::model::{Action, Node, Pc, Replica, Sale, World};

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
            if !buyer.live() || buyer.pc == Pc::Done {
                continue;
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
            Action::Step(_) | Action::Tick => {}
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
}
