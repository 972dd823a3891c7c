//! The commands the protocols share, as `crate::section` shares them in
//! the code: claiming the request id, the read, the business work, the
//! watchdog's word, the write, letting go; the ending the lock protocols
//! share (read -> work -> check -> write -> release, [`Ending`]); and each
//! one in words. Each protocol's file says when it sends them.

use super::{At, LockKey, Request, Sale, World};
use crate::check::protocol::Fence;
use crate::wire::Said;

impl Sale {
    /// Claims the request id (the lock variants' first command when every
    /// buyer retries one). An answered id is answered from its record; one
    /// whose claim another attempt holds is told `in_progress`, until the
    /// claim's lease runs out and a retry takes it over. Whether it claimed.
    pub(super) fn claim(&self, w: &mut World, n: u8) -> bool {
        match w.request {
            Request::Final => false,
            Request::Pending(_, at) if w.now < at + self.bounds.lease => false,
            Request::None | Request::Pending(..) => {
                w.request = Request::Pending(n, w.now);
                true
            }
        }
    }

    /// The read: refused for a stale token; sold out (a final answer, kept
    /// for its request id); or the stock, the unit it will sell. Whether it
    /// read a unit (and works next).
    pub(super) fn read(&self, w: &mut World, n: u8) -> bool {
        let i = usize::from(n);
        if !self.admits(w, n) {
            return false;
        }
        if w.stock == 0 {
            if self.claims_ids() && matches!(w.request, Request::Pending(m, _) if m == n) {
                w.request = Request::Final;
            }
            return false;
        }
        w.buyers[i].read = w.stock;
        w.buyers[i].read_epoch = w.epoch;
        w.buyers[i].work_until = w.now + self.bounds.work;
        true
    }

    /// Whether buyer `n`'s business work is over.
    pub(super) fn worked(&self, w: &World, n: u8) -> bool {
        w.now >= w.buyers[usize::from(n)].work_until
    }

    /// The watchdog's word, and the local deadline: the lock is counted on
    /// only until a lease after its last renewal. Whether it may write.
    pub(super) fn still_held(&self, w: &World, n: u8) -> bool {
        let buyer = &w.buyers[usize::from(n)];
        let lost = buyer.lost && !self.mutation.no_lost_check;
        let late = w.now >= buyer.renewed + self.bounds.lease && !self.mutation.no_local_deadline;
        !lost && !late
    }

    /// The write: the stock less the unit it read. It refuses an attempt
    /// whose id's claim is no longer its own, one whose read came before
    /// the SKU's last reset, and a stale token.
    pub(super) fn write(&self, w: &mut World, n: u8) {
        let i = usize::from(n);
        let claimed = !self.claims_ids()
            || self.mutation.no_claim_check
            || matches!(w.request, Request::Pending(m, _) if m == n);
        let same_epoch = w.buyers[i].read_epoch == w.epoch || self.mutation.no_epoch_check;
        if self.admits(w, n) && claimed && same_epoch {
            self.sell_read(w, n);
            if self.claims_ids() {
                w.request = Request::Final;
            }
        }
    }

    /// Sells the unit buyer `n` read: the stock set to it minus one, that
    /// unit counted sold once more (twice sold: an oversell).
    pub(in crate::check) fn sell_read(&self, w: &mut World, n: u8) {
        let unit = w.buyers[usize::from(n)].read;
        w.stock = unit - 1;
        let times = &mut w.sold[usize::from(unit) - 1];
        *times = times.saturating_add(1);
        self.sold_by(w, n);
    }

    /// SET NX PX with the buyer's token and a lease (the caller checked
    /// the key was free); the fencing token comes with the grant, in the
    /// same script (fenced: INCR; etcd's revision, ZooKeeper's czxid).
    pub(super) fn take_lease(&self, w: &mut World, n: u8) {
        let i = usize::from(n);
        w.lock = Some(LockKey {
            owner: Some(n),
            holder: n,
            expires: Some(w.now + self.bounds.lease),
            value: 0,
        });
        w.buyers[i].renewed = w.now;
        if self.protocol.fence == Fence::Checked {
            w.fence += 1;
            w.buyers[i].token = w.fence;
        }
    }

    /// `WAIT 1`: did a replica get the lock? If not, the buyer lets it go.
    /// Whether it goes on.
    pub(super) fn replicated(&self, w: &mut World, n: u8) -> bool {
        let replicated = self.mutation.no_wait
            || w.replica
                .and_then(|r| r.lock)
                .is_some_and(|l| l.owner == Some(n));
        if !replicated && w.lock.is_some_and(|lock| lock.owner == Some(n)) {
            w.lock = None;
        }
        replicated
    }

    /// DEL, whoever's lock it is (the model notes a lock that was another's).
    pub(super) fn delete(&self, w: &mut World, n: u8) {
        if w.lock
            .is_some_and(|lock| lock.owner.is_some() && lock.owner != Some(n))
        {
            w.freed_anothers = true;
        }
        w.lock = None;
    }

    /// Deletes the lock only if it still holds the buyer's token (or,
    /// with `plain_del_release`, whoever's it is).
    pub(super) fn compare_and_delete(&self, w: &mut World, n: u8) {
        if self.mutation.plain_del_release {
            self.delete(w, n);
        } else if w.lock.is_some_and(|lock| lock.owner == Some(n)) {
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

    /// What the witnesses look for in a sale by buyer `n`: one once the
    /// scenario's faults struck, one within a lease and a tick of a
    /// holder's death, by another buyer (the lock freed), and one while
    /// Redlock's nodes had no majority up.
    pub(super) fn sold_by(&self, w: &mut World, n: u8) {
        if self.all_struck(w) {
            w.sold_after_faults = true;
        }
        if w.crash_struck {
            w.sold_since_crash = true;
        }
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
    pub(in crate::check) fn free_mutex(&self, w: &mut World, n: u8) {
        if std::mem::take(&mut w.buyers[usize::from(n)].holds_mutex) {
            w.mutexes[self.process_of(n)] = None;
        }
    }

    /// Buyer `n`'s call fails (Redis is down): it is answered 503, and its
    /// process lets go of what it held.
    pub(in crate::check) fn fail(&self, w: &mut World, n: u8) {
        self.free_mutex(w, n);
        let buyer = &mut w.buyers[usize::from(n)];
        buyer.pc = buyer.pc.done();
        if matches!(w.request, Request::Pending(m, _) if m == n) {
            w.request = Request::None;
        }
    }
}

/// Where the shared ending sends a lock protocol's buyer, in that
/// protocol's own program counter: its work, its watchdog's word (`None`:
/// no watchdog, the work goes straight to the write), its write, its
/// release, and where it is done.
pub(super) struct Ending<P> {
    pub work: P,
    pub check: Option<P>,
    pub write: P,
    pub release: P,
    pub done: P,
}

impl Sale {
    /// Buyer `n`'s step from `at` in the ending every lock protocol shares:
    /// the read (a unit: work; sold out or refused: release), the work,
    /// the watchdog's word (lost: release, no write), the write, and the
    /// release, which lets go as the protocol does (`release`). `None`
    /// while the work goes on, and once done.
    pub(super) fn ending<P: Copy>(
        &self,
        w: &mut World,
        n: u8,
        at: At,
        to: &Ending<P>,
        release: impl FnOnce(&Sale, &mut World, u8),
    ) -> Option<P> {
        Some(match at {
            At::Read if self.read(w, n) => to.work,
            At::Read => to.release,
            At::Work if !self.worked(w, n) => return None,
            At::Work => to.check.unwrap_or(to.write),
            At::Check if self.still_held(w, n) => to.write,
            // Lock lost: busy, no write.
            At::Check => to.release,
            At::Write => {
                self.write(w, n);
                to.release
            }
            At::Release => {
                release(self, w, n);
                to.done
            }
            // Done (no step of the ending starts anywhere else).
            _ => return None,
        })
    }
}

/// A shared step in words: buyer `n`'s step from `at`, between `before`
/// and `after`.
pub(super) fn says(sale: &Sale, at: At, before: &World, after: &World, n: u8) -> Said {
    let i = usize::from(n);
    let (was, now) = (&before.buyers[i], &after.buyers[i]);
    let next = now.pc.at();
    let (read, unit) = (now.read, was.read);
    match at {
        At::Claim if next == At::Done => crate::said!(
            "finds the id claimed or answered: no sale",
            "发现这个 ID 已被占用或已有答复:不卖"
        ),
        At::Claim if matches!(before.request, Request::Pending(..)) => crate::said!(
            "takes over the request id's expired claim",
            "接管请求 ID 已过期的占用"
        ),
        At::Claim => crate::said!("claims the request id", "占用请求 ID"),
        At::Read if next == At::Work => crate::said!("reads stock {read}", "读到库存 {read}"),
        At::Read => crate::said!("is refused or finds it sold out", "被拒绝,或发现已经卖完"),
        At::Work => crate::said!("ends its work", "完成业务处理"),
        At::Check if next == At::Write => {
            crate::said!(
                "hears from its watchdog: still held",
                "收到看门狗的消息:锁还在"
            )
        }
        At::Check if was.lost => crate::said!(
            "hears from its watchdog: lock lost, no write",
            "收到看门狗的消息:锁已丢失,不写"
        ),
        At::Check => crate::said!(
            "is past its local deadline (no renewal for a lease): no write",
            "已过本地截止时间(一个租约内没有续约):不写"
        ),
        At::Write if after.sold != before.sold => {
            crate::said!("writes: sells unit {unit}", "写入:卖出第 {unit} 件")
        }
        At::Write if was.read_epoch != before.epoch => crate::said!(
            "writes: refused, its read came before the SKU's reset",
            "写入:被拒绝,它读库存是在 SKU 重置之前"
        ),
        At::Write
            if sale.claims_ids() && !matches!(before.request, Request::Pending(m, _) if m == n) =>
        {
            crate::said!(
                "writes: refused, its request id's claim was taken over",
                "写入:被拒绝,它对请求 ID 的占用已被接管"
            )
        }
        At::Write => crate::said!(
            "writes with a stale token: refused",
            "用过期的 token 写入:被拒绝"
        ),
        At::Release => crate::said!("releases", "释放锁"),
        At::Done => crate::said!("is done", "结束"),
        _ => {
            let moment = at.moment();
            Said {
                en: format!("moves on ({})", moment.en),
                zh: format!("继续({})", moment.zh),
            }
        }
    }
}

/// A lock taken, in words: with its fencing token if it got one, or
/// found taken (busy).
pub(super) fn says_taken(before: &World, after: &World, n: u8) -> Said {
    let i = usize::from(n);
    let (was, now) = (&before.buyers[i], &after.buyers[i]);
    let token = now.token;
    if token > was.token {
        crate::said!(
            "takes the lock with fencing token {token}",
            "拿到锁,fencing token 为 {token}"
        )
    } else if after.lock != before.lock || now.holds_mutex {
        crate::said!("takes the lock", "拿到锁")
    } else {
        crate::said!("finds the lock taken: busy", "发现锁已被占用:忙")
    }
}

/// A `WAIT 1` in words.
pub(super) fn says_wait(after: &World, n: u8) -> Said {
    match after.buyers[usize::from(n)].pc.at() {
        At::Read => crate::said!("WAIT: a replica has the lock", "WAIT:一个副本已有这把锁"),
        _ => crate::said!(
            "WAIT: no replica has the lock, lets it go: busy",
            "WAIT:没有副本有这把锁,放弃它:忙"
        ),
    }
}
