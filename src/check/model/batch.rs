//! `pg-batch`: a batch's transaction takes the stock row's lock, reads the
//! stock and then, under that lock, looks up its buyers' ids; it decides
//! each buyer and writes what it decided (the row set to what was read
//! less the units taken, each sale's row and each id's answer) with its
//! commit, which lets the row go. Unlike `pg-update`, the id's answer is
//! looked up after the lock and not before, so no attempt of the id can
//! commit between the look-up and the write: the lock, not the id's
//! unique key, keeps one sale an id. Unlike the database's locks, no
//! business work runs inside (`work_ms` is ignored) and nothing waits in
//! silence for a lease.
//!
//! The model's batches hold one buyer each (in the lab's cells every
//! buyer is its own instance, and so its own lane): a batch of several is
//! its buyers decided one after the other inside the one transaction,
//! which `tests/api/pgstock/batch.rs` holds to `pg-update`'s answers on a
//! real PostgreSQL. What the model checks is what surrounds the batch: the
//! row's lock, the look-up under it, the absolute write, the commit and
//! its lost answers. A buyer whose transaction died, or whose commit's
//! answer did, asks again with its id: its next batch finds the record.

use super::steps::Steps;
use super::{At, Sale, World};
use crate::wire::Said;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// `SELECT … FOR UPDATE`: the row's lock, waited for.
    Lock,
    /// Under the lock: the stock read, and the id's answer looked up.
    Read,
    /// The batch's write and its commit, which frees the row.
    Commit,
    /// Its transaction died with the database, or its commit's answer
    /// did: asks again with its request id (in a new batch).
    Retry,
    Done,
}

impl Steps for Pc {
    const DONE: Pc = Pc::Done;

    fn start(_: &Sale) -> Pc {
        Pc::Lock
    }

    fn step(self, sale: &Sale, w: &mut World, n: u8) -> Option<Pc> {
        // One lock for all: the row's (`Sale::process_of` is 0).
        let lock = sale.process_of(n);
        let i = usize::from(n);
        Some(match self {
            // The mutation: read without FOR UPDATE, nothing waited for.
            Pc::Lock | Pc::Retry if sale.mutation.no_database_lock => Pc::Read,
            Pc::Lock | Pc::Retry if w.mutexes[lock].is_some() => return None,
            Pc::Lock | Pc::Retry => {
                w.mutexes[lock] = Some(n);
                w.buyers[i].holds_mutex = true;
                Pc::Read
            }
            // Answered before: replayed, nothing written, the row let go.
            Pc::Read if sale.id_recorded(w, n) => {
                sale.free_mutex(w, n);
                Pc::Done
            }
            Pc::Read => {
                w.buyers[i].read = w.stock;
                w.buyers[i].read_epoch = w.epoch;
                Pc::Commit
            }
            // The id's key: only without the lock can another attempt of
            // the id have committed since the look-up; the commit fails.
            Pc::Commit if sale.id_recorded(w, n) => {
                sale.free_mutex(w, n);
                Pc::Done
            }
            // None left when read: the sold-out answer is committed.
            Pc::Commit if w.buyers[i].read == 0 => {
                sale.record_answer(w, n, false);
                sale.free_mutex(w, n);
                Pc::Done
            }
            Pc::Commit => {
                // The stock set to what was read less one: absolute, as
                // the batch writes it (right only under the row's lock).
                sale.sell_read(w, n);
                sale.record_answer(w, n, true);
                sale.free_mutex(w, n);
                Pc::Done
            }
            Pc::Done => return None,
        })
    }

    fn at(self) -> At {
        match self {
            Pc::Lock => At::Start,
            Pc::Read => At::Read,
            Pc::Commit => At::Write,
            Pc::Retry => At::Retry,
            Pc::Done => At::Done,
        }
    }

    fn moment(self) -> Said {
        match self {
            Pc::Commit => crate::said!(
                "before its batch's write and commit",
                "在它那一批的写入并提交之前"
            ),
            pc => pc.at().moment(),
        }
    }

    fn says(self, sale: &Sale, before: &World, after: &World, n: u8) -> Said {
        let i = usize::from(n);
        let next = after.buyers[i].pc;
        match self {
            Pc::Lock | Pc::Retry if sale.mutation.no_database_lock => crate::said!(
                "its batch reads the row without FOR UPDATE: nothing locked",
                "它那一批读取库存行时没有 FOR UPDATE:什么都没锁"
            ),
            Pc::Lock | Pc::Retry => crate::said!(
                "its batch takes the row's lock (SELECT ... FOR UPDATE)",
                "它那一批拿到行锁(SELECT ... FOR UPDATE)"
            ),
            Pc::Read if next == Pc::Done.into() => super::steps::asks_for_its_answer(true),
            Pc::Read => crate::said!(
                "reads stock {}; its id has no answer yet",
                "读到库存 {};它的 ID 还没有答复";
                after.buyers[i].read
            ),
            Pc::Commit if after.sold == before.sold && sale.id_recorded(before, n) => {
                crate::said!(
                    "commits: refused by its id's key (another attempt committed first), rolled back",
                    "提交:被它的 ID 的唯一键拒绝(另一次尝试先提交了),回滚"
                )
            }
            Pc::Commit if after.sold == before.sold => {
                crate::said!("commits its sold-out answer", "提交它的售罄答复")
            }
            Pc::Commit => crate::said!(
                "writes stock {} and commits: sells unit {}",
                "写入库存 {} 并提交:卖出第 {} 件";
                after.stock,
                before.buyers[i].read
            ),
            Pc::Done => crate::said!("is done", "结束"),
        }
    }
}
