//! A buyer's commands, one step each: how it takes the lock, reads,
//! writes and lets go, as its variant's protocol says.

use super::model::{LockKey, Outage, Pc, Request, Sale, World};
use super::protocol::{Acquire, Enqueue, Fence, Release};

impl Sale {
    pub(super) fn step(&self, w: &mut World, n: u8) {
        if w.redis == Outage::Down {
            // Its command fails: the buyer is answered 503.
            self.fail(w, n);
            return;
        }
        let i = usize::from(n);
        let lease = self.bounds.lease;
        let pc = w.buyers[i].pc;
        let next = match pc {
            Pc::Acquire => self.acquire(w, n),
            Pc::Expire => {
                // EXPIRE sets the TTL of whatever lock is there.
                if let Some(lock) = &mut w.lock {
                    lock.expires = Some(w.now + lease);
                }
                Pc::Read
            }
            Pc::ReadExpiry => match w.lock {
                None => Pc::Done, // gone meanwhile: busy, try again later
                Some(lock) if lock.value < self.clock(w, n) => {
                    w.buyers[i].seen_value = lock.value;
                    Pc::TakeOver
                }
                Some(_) => Pc::Done,
            },
            Pc::TakeOver => {
                // GETSET: the new expiry is written whatever it swaps out;
                // the lock is this buyer's only if it swapped out the value
                // it read (otherwise another buyer took it over first).
                let old = w.lock.map(|lock| lock.value);
                w.lock = Some(LockKey {
                    owner: None,
                    holder: n,
                    expires: None,
                    value: self.clock(w, n) + lease,
                });
                if old == Some(w.buyers[i].seen_value) || self.mutation.no_getset_compare {
                    Pc::Read
                } else {
                    Pc::Done
                }
            }
            Pc::Read => {
                if !self.admits(w, n) {
                    // A stale token is refused.
                    Pc::Release
                } else if w.stock == 0 {
                    // Sold out: a final answer, kept for its request id.
                    if self.claims_ids() && matches!(w.request, Request::Pending(m, _) if m == n) {
                        w.request = Request::Final;
                    }
                    Pc::Release
                } else {
                    w.buyers[i].read = w.stock;
                    w.buyers[i].read_epoch = w.epoch;
                    w.buyers[i].work_until = w.now + self.bounds.work;
                    Pc::Work
                }
            }
            Pc::Work => {
                if self.protocol.watchdog {
                    Pc::Check
                } else {
                    Pc::Write
                }
            }
            Pc::Check => {
                // The watchdog's word, and the local deadline: the lock is
                // counted on only until a lease after its last renewal.
                let lost = w.buyers[i].lost && !self.mutation.no_lost_check;
                let late = w.now >= w.buyers[i].renewed + lease && !self.mutation.no_local_deadline;
                if lost || late {
                    Pc::Release // busy: lock lost
                } else {
                    Pc::Write
                }
            }
            Pc::Write => {
                // The write refuses an attempt whose id's claim is no longer
                // its own, and one whose read came before the SKU's last reset.
                let claimed = !self.claims_ids()
                    || self.mutation.no_claim_check
                    || matches!(w.request, Request::Pending(m, _) if m == n);
                let same_epoch = w.buyers[i].read_epoch == w.epoch || self.mutation.no_epoch_check;
                if self.admits(w, n) && claimed && same_epoch {
                    let unit = w.buyers[i].read;
                    w.stock = unit - 1;
                    let times = &mut w.sold[usize::from(unit) - 1];
                    *times = times.saturating_add(1);
                    self.sold_by(w, n);
                    if self.claims_ids() {
                        w.request = Request::Final;
                    }
                }
                Pc::Release
            }
            Pc::Claim => match w.request {
                // A retry of an answered id is answered from its record; one
                // whose claim another attempt holds is told in_progress,
                // until the claim's lease runs out and the retry takes it over.
                Request::Final => Pc::Done,
                Request::Pending(_, at) if w.now < at + lease => Pc::Done,
                Request::None | Request::Pending(..) => {
                    w.request = Request::Pending(n, w.now);
                    Pc::Acquire
                }
            },
            Pc::Vote => self.vote(w, n),
            Pc::WaitReplica => {
                // WAIT 1: did a replica get the lock? If not, let it go.
                let replicated = self.mutation.no_wait
                    || w.replica
                        .and_then(|r| r.lock)
                        .is_some_and(|l| l.owner == Some(n));
                if replicated {
                    Pc::Read
                } else {
                    if w.lock.is_some_and(|lock| lock.owner == Some(n)) {
                        w.lock = None;
                    }
                    Pc::Done
                }
            }
            Pc::Count => {
                // A majority of votes, counted within the lease (validity:
                // a round slower than the lease holds nothing it can trust).
                let votes = w.buyers[i].votes.count_ones() as u8;
                let needed = if self.mutation.one_vote {
                    1
                } else {
                    self.majority()
                };
                let valid = w.now < w.buyers[i].started + lease || self.mutation.no_validity;
                if votes >= needed && valid {
                    w.buyers[i].renewed = w.now;
                    Pc::Read
                } else {
                    // No quorum: let go of what it got, and try again.
                    self.release_nodes(w, n);
                    Pc::Acquire
                }
            }
            Pc::Release => {
                self.release(w, n);
                Pc::Done
            }
            Pc::Retry => {
                self.script(w, n);
                Pc::Done
            }
            Pc::Enqueue => {
                self.enqueue(w, n);
                Pc::Done
            }
            Pc::Done => Pc::Done,
        };
        // An attempt that ends without an answer frees its id for a retry.
        if next == Pc::Done && matches!(w.request, Request::Pending(m, _) if m == n) {
            w.request = Request::None;
        }
        w.buyers[i].pc = next;
    }

    fn acquire(&self, w: &mut World, n: u8) -> Pc {
        let i = usize::from(n);
        let lease = self.bounds.lease;
        match self.protocol.acquire {
            Acquire::Nothing => Pc::Read,
            Acquire::Atomic => {
                let sold = self.script(w, n);
                match self.protocol.enqueue {
                    Enqueue::AfterScript if sold && self.bounds.orders.is_some() => Pc::Enqueue,
                    _ => Pc::Done,
                }
            }
            Acquire::Majority => {
                w.buyers[i].asked = 0;
                w.buyers[i].votes = 0;
                w.buyers[i].started = w.now;
                self.vote(w, n)
            }
            Acquire::LocalMutex => {
                w.mutexes[self.process_of(n)] = Some(n);
                w.buyers[i].holds_mutex = true;
                Pc::Read
            }
            Acquire::SetNx | Acquire::SetNxExpiry | Acquire::SetNxPx | Acquire::Waiting
                if w.lock.is_some() =>
            {
                match self.protocol.acquire {
                    Acquire::SetNxExpiry => Pc::ReadExpiry,
                    _ => Pc::Done, // busy
                }
            }
            Acquire::SetNx => {
                w.lock = Some(LockKey {
                    owner: None,
                    holder: n,
                    expires: None,
                    value: 0,
                });
                Pc::Expire
            }
            Acquire::SetNxExpiry => {
                w.lock = Some(LockKey {
                    owner: None,
                    holder: n,
                    expires: None,
                    value: self.clock(w, n) + lease,
                });
                Pc::Read
            }
            Acquire::SetNxPx | Acquire::Waiting => {
                w.lock = Some(LockKey {
                    owner: Some(n),
                    holder: n,
                    expires: Some(w.now + lease),
                    value: 0,
                });
                w.buyers[i].renewed = w.now;
                // The fencing token comes with the grant, in the same
                // script (fenced: INCR; etcd's revision, ZooKeeper's czxid).
                if self.protocol.fence == Fence::Checked {
                    w.fence += 1;
                    w.buyers[i].token = w.fence;
                }
                if self.bounds.wait_replicas {
                    Pc::WaitReplica
                } else {
                    Pc::Read
                }
            }
        }
    }

    /// The request id whose record the sale's script checks for buyer `n`:
    /// 0 when every buyer retries one, its own with cut-off calls, none
    /// without ids (or with the record taken out).
    pub(super) fn script_id(&self, n: u8) -> Option<u8> {
        match () {
            _ if self.mutation.no_request_claim => None,
            _ if self.bounds.one_request => Some(0),
            _ if self.bounds.cutoffs > 0 => Some(n),
            _ => None,
        }
    }

    /// The `lua` family's sale, one script run by Redis to its end: an id
    /// with a record is answered from it; otherwise it sells a unit (one
    /// given back first), records the id, and for `lua-stream` adds the
    /// order's message. Whether it sold.
    pub(super) fn script(&self, w: &mut World, n: u8) -> bool {
        if let Some(id) = self.script_id(n) {
            if w.answered & (1 << id) != 0 {
                return false;
            }
            w.answered |= 1 << id;
        }
        if w.stock == 0 {
            return false;
        }
        let unit = match w.returned {
            0 => w.stock,
            bits => {
                let unit = bits.trailing_zeros() as u8 + 1;
                w.returned &= !(1 << (unit - 1));
                unit
            }
        };
        w.stock -= 1;
        self.sold_by(w, n);
        // A unit past the stock (one given back too often) counts as the last
        // one sold again: more sold than stocked.
        let at = usize::from(unit - 1).min(w.sold.len() - 1);
        w.sold[at] = w.sold[at].saturating_add(1);
        w.script_sales[usize::from(n)] += 1;
        w.buyers[usize::from(n)].read = unit;
        if self.bounds.orders.is_some() {
            self.order(w, n, unit);
        }
        true
    }

    /// Buyer `n`'s call fails (Redis is down): it is answered 503, and its
    /// process lets go of what it held.
    pub(super) fn fail(&self, w: &mut World, n: u8) {
        self.free_mutex(w, n);
        w.buyers[usize::from(n)].pc = Pc::Done;
        if matches!(w.request, Request::Pending(m, _) if m == n) {
            w.request = Request::None;
        }
    }

    /// What the witnesses look for in a sale by buyer `n`: one within a
    /// lease and a tick of a holder's death, by another buyer (the lock
    /// freed), and one while Redlock's nodes had no majority up.
    fn sold_by(&self, w: &mut World, n: u8) {
        if let Some(at) = w.holder_crash
            && !w.buyers[usize::from(n)].crashed
            && w.now <= at + self.bounds.lease + 1
        {
            w.freed = true;
        }
        let up = w.nodes.iter().filter(|node| node.up).count() as u8;
        if self.bounds.nodes > 0 && up < self.majority() {
            w.sold_while_down = true;
        }
    }

    /// Buyer `n` lets go of its process's local mutex, if it holds it.
    pub(super) fn free_mutex(&self, w: &mut World, n: u8) {
        if std::mem::take(&mut w.buyers[usize::from(n)].holds_mutex) {
            w.mutexes[self.process_of(n)] = None;
        }
    }

    fn release(&self, w: &mut World, n: u8) {
        self.free_mutex(w, n);
        if self.protocol.acquire == Acquire::Majority {
            self.release_nodes(w, n);
            return;
        }
        let owned = w.lock.is_some_and(|lock| lock.owner == Some(n));
        let plain_del = match self.protocol.release {
            Release::Nothing => return,
            Release::Del => true,
            Release::CompareAndDelete => self.mutation.plain_del_release,
        };
        if plain_del {
            if w.lock.is_some_and(|lock| lock.owner.is_some()) && !owned {
                w.freed_anothers = true;
            }
            w.lock = None;
        } else if owned {
            w.lock = None;
        }
    }

    /// Whether the ledger admits buyer `n`'s token (its fenced read and
    /// write): the highest token seen so far, or higher.
    fn admits(&self, w: &mut World, n: u8) -> bool {
        if self.protocol.fence != Fence::Checked || self.mutation.no_fence_check {
            return true;
        }
        let token = w.buyers[usize::from(n)].token;
        if token < w.seen {
            return false;
        }
        w.seen = token;
        true
    }

    /// Redlock: SET NX PX on the next node (a node that is down says no);
    /// after the last one, count.
    fn vote(&self, w: &mut World, n: u8) -> Pc {
        let i = usize::from(n);
        let k = usize::from(w.buyers[i].asked);
        let node = &mut w.nodes[k];
        if node.up && node.lock.is_none() {
            node.lock = Some(LockKey {
                owner: Some(n),
                holder: n,
                expires: Some(w.now + self.bounds.lease),
                value: 0,
            });
            w.buyers[i].votes |= 1 << k;
        }
        w.buyers[i].asked += 1;
        if w.buyers[i].asked == self.bounds.nodes {
            Pc::Count
        } else {
            Pc::Vote
        }
    }

    /// Redlock: compare-and-delete on every node.
    fn release_nodes(&self, w: &mut World, n: u8) {
        for node in w.nodes.iter_mut().filter(|node| node.up) {
            if node.lock.is_some_and(|lock| lock.owner == Some(n)) {
                node.lock = None;
            }
        }
        w.buyers[usize::from(n)].votes = 0;
    }
}
