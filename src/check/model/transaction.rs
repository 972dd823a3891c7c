//! `pg-for-update`, `pg-advisory`: a lock the database holds for the
//! buyer's transaction (the stock row's, or an advisory lock on the SKU),
//! one for every buyer of every instance. It is held from the grant to
//! the commit however long the work takes (the holder is heard while it
//! works), and waited for meanwhile; but a holder frozen for its lease,
//! heard from no more, has its session ended by the database (the
//! transaction's idle timeout): its lock is free, and its commit refused
//! when it wakes. The model ends that session when another buyer asks for
//! the lock, the first moment anyone else could see it ended. The write and the commit are one step (the
//! write is seen only once committed, and the commit lets the lock go);
//! a holder that dies takes its transaction with it, the lock freed
//! (`crate::check::faults`: a crash frees a buyer's mutex, and this lock
//! is the one mutex of the database). With ids in play (every buyer a
//! retry of one, or a crash of the database), the buyer first asks the
//! database for its id's answer (an answered id is replayed), and the
//! commit records the id's answer with the sale; the id's unique key
//! rolls back a commit whose id another attempt committed first (no
//! claim as the Redis locks take: the key is what keeps one sale an id).
//! A buyer whose transaction died asks again with its id.

use super::steps::{Steps, answer_first};
use super::{At, Sale, World, section};
use crate::wire::Said;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// With request ids in play: asks the database for its id's answer.
    Answered,
    Acquire,
    Read,
    Work,
    /// The write, and the commit that releases the lock.
    Commit,
    /// Its transaction died with the database, or its commit's answer
    /// did: asks again with its request id.
    Retry,
    Done,
}

impl Steps for Pc {
    const DONE: Pc = Pc::Done;

    fn start(sale: &Sale) -> Pc {
        answer_first(sale, Pc::Answered, Pc::Acquire)
    }

    fn step(self, sale: &Sale, w: &mut World, n: u8) -> Option<Pc> {
        // One lock for all: the database's (`Sale::process_of` is 0).
        let lock = sale.process_of(n);
        Some(match self {
            Pc::Answered | Pc::Retry if sale.id_recorded(w, n) => Pc::Done,
            Pc::Answered | Pc::Retry => Pc::Acquire,
            // The holder frozen for its lease: the database ended its
            // session, which freed the lock.
            Pc::Acquire if w.mutexes[lock].is_some_and(|h| silent(sale, w, h)) => {
                let holder = w.mutexes[lock].unwrap_or(n);
                w.buyers[usize::from(holder)].lost = true;
                sale.free_mutex(w, holder);
                Pc::Acquire
            }
            // The mutation: no lock taken, the section runs beside others.
            Pc::Acquire if sale.mutation.no_database_lock => Pc::Read,
            // Waits while another transaction holds it.
            Pc::Acquire if w.mutexes[lock].is_some() => return None,
            Pc::Acquire => {
                w.mutexes[lock] = Some(n);
                w.buyers[usize::from(n)].holds_mutex = true;
                Pc::Read
            }
            Pc::Read if sale.read(w, n) => Pc::Work,
            // Sold out: the transaction commits its answer, the lock goes.
            Pc::Read => {
                sale.record_answer(w, n, false);
                sale.free_mutex(w, n);
                Pc::Done
            }
            Pc::Work if !sale.worked(w, n) => return None,
            Pc::Work => Pc::Commit,
            // Its session ended while it was silent: the write is refused
            // with it (`lock_lost`), nothing sold.
            Pc::Commit if w.buyers[usize::from(n)].lost => Pc::Done,
            // The id's key: another attempt committed first; the commit
            // fails, the transaction rolls back, its answer is replayed.
            Pc::Commit if sale.id_recorded(w, n) => {
                sale.free_mutex(w, n);
                Pc::Done
            }
            Pc::Commit => {
                let before = w.sold.iter().map(|&k| u32::from(k)).sum::<u32>();
                sale.write(w, n);
                let sold = w.sold.iter().map(|&k| u32::from(k)).sum::<u32>() > before;
                sale.record_answer(w, n, sold);
                // A sale after a silent holder's session was ended.
                if sold && w.buyers.iter().any(|b| b.lost) {
                    w.freed = true;
                }
                sale.free_mutex(w, n);
                Pc::Done
            }
            Pc::Done => return None,
        })
    }

    fn at(self) -> At {
        match self {
            Pc::Answered => At::Claim,
            Pc::Acquire => At::Start,
            Pc::Read => At::Read,
            Pc::Work => At::Work,
            Pc::Commit => At::Write,
            Pc::Retry => At::Retry,
            Pc::Done => At::Done,
        }
    }

    fn moment(self) -> Said {
        match self {
            Pc::Commit => crate::said!("before its write and commit", "在写入并提交之前"),
            pc => pc.at().moment(),
        }
    }

    fn says(self, sale: &Sale, before: &World, after: &World, n: u8) -> Said {
        match self {
            Pc::Acquire if after.buyers[usize::from(n)].pc == before.buyers[usize::from(n)].pc => {
                crate::said!(
                    "finds its holder silent past its lease: the database ended that session, the lock is free",
                    "发现持有者沉默超过了租约:数据库结束了那个会话,锁空出来了"
                )
            }
            Pc::Acquire => section::says_taken(before, after, n),
            Pc::Answered | Pc::Retry if after.buyers[usize::from(n)].pc == Pc::Done.into() => {
                super::steps::asks_for_its_answer(true)
            }
            Pc::Answered => super::steps::asks_for_its_answer(false),
            Pc::Retry => {
                crate::said!(
                    "asks again with its request id: none recorded, it starts again",
                    "用它的请求 ID 再问一次:没有记录,从头开始"
                )
            }
            Pc::Commit if before.buyers[usize::from(n)].lost => {
                crate::said!(
                    "writes: refused, the database ended its session while it was silent (lock_lost)",
                    "写入:被拒绝,它沉默期间数据库结束了它的会话(lock_lost)"
                )
            }
            Pc::Commit if after.sold == before.sold && sale.id_recorded(before, n) => {
                crate::said!(
                    "commits: refused by its id's key (another attempt committed first), rolled back",
                    "提交:被它的 ID 的唯一键拒绝(另一次尝试先提交了),回滚"
                )
            }
            pc => section::says(sale, pc.at(), before, after, n),
        }
    }
}

/// Whether holder `h` has been frozen for the lease (`Bounds::lease`
/// ticks since its freeze struck): the database, hearing nothing, ended
/// its session. Never with the mutation that sets no idle timeout.
fn silent(sale: &Sale, w: &World, h: u8) -> bool {
    let bounds = &sale.bounds;
    let freeze = match bounds.freeze {
        0 => bounds.lease + 1,
        ticks => ticks,
    };
    !sale.mutation.no_idle_timeout
        && w.buyers[usize::from(h)]
            .frozen_until
            .is_some_and(|until| w.now + freeze >= until + bounds.lease)
}
