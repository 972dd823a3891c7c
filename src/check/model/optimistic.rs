//! `pg-optimistic`: no lock. With request ids in play the buyer first asks
//! the database for its id's answer; then it reads the stock with the
//! row's version, works holding nothing, and writes what it read minus one
//! only if the version is still the one it read (`UPDATE ... WHERE
//! version = $read`, the sale's row and the id's answer in the same
//! statement). A write that finds no row (someone wrote meanwhile) reads
//! again, up to [`TRIES`] attempts in all; then the buyer gives up, told
//! `busy` with stock perhaps left. None left at the read: the id's
//! sold-out answer is recorded. The id's unique key refuses a write whose
//! id another attempt committed first (its answer replayed).
//!
//! The version is the stock itself here: the database's stock only ever
//! comes down in these cells (nothing is given back to it), so a write
//! since the read has moved both.

use super::steps::{Steps, answer_first};
use super::{At, Sale, World};
use crate::wire::Said;

/// How many times a buyer reads and tries to write before it gives up:
/// the code's (`pg-optimistic`'s `TRIES`).
pub const TRIES: u8 = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// With request ids in play: asks the database for its id's answer.
    Answered,
    /// `SELECT remaining, version`.
    Read,
    Work,
    /// The version-checked write, the sale's row and the id's answer.
    Write,
    /// Its write's answer lost: asks again with its request id.
    Retry,
    Done,
}

impl Steps for Pc {
    const DONE: Pc = Pc::Done;

    fn start(sale: &Sale) -> Pc {
        answer_first(sale, Pc::Answered, Pc::Read)
    }

    fn step(self, sale: &Sale, w: &mut World, n: u8) -> Option<Pc> {
        let i = usize::from(n);
        Some(match self {
            Pc::Answered | Pc::Retry if sale.id_recorded(w, n) => Pc::Done,
            Pc::Answered | Pc::Retry => {
                w.buyers[i].tries = 0;
                Pc::Read
            }
            // None left: the sold-out answer, recorded for its id.
            Pc::Read if w.stock == 0 => {
                sale.record_id(w, n);
                Pc::Done
            }
            Pc::Read => {
                w.buyers[i].read = w.stock;
                w.buyers[i].work_until = w.now + sale.bounds.work;
                w.buyers[i].tries += 1;
                Pc::Work
            }
            Pc::Work if !sale.worked(w, n) => return None,
            Pc::Work => Pc::Write,
            // The version moved: no row; read again, or give up (busy).
            Pc::Write if w.buyers[i].read != w.stock && !sale.mutation.no_version_check => {
                match w.buyers[i].tries < TRIES {
                    true => Pc::Read,
                    false => Pc::Done,
                }
            }
            // The id's key: another attempt committed first, the statement
            // is refused whole and that attempt's answer replayed.
            Pc::Write if sale.id_recorded(w, n) => Pc::Done,
            Pc::Write => {
                sale.sell_read(w, n);
                sale.record_answer(w, n, true);
                Pc::Done
            }
            Pc::Done => return None,
        })
    }

    fn at(self) -> At {
        match self {
            Pc::Answered => At::Claim,
            Pc::Read => At::Read,
            Pc::Work => At::Work,
            Pc::Write => At::Write,
            Pc::Retry => At::Retry,
            Pc::Done => At::Done,
        }
    }

    fn says(self, _: &Sale, before: &World, after: &World, n: u8) -> Said {
        let i = usize::from(n);
        let next = after.buyers[i].pc;
        match self {
            Pc::Answered | Pc::Retry if next == Pc::Done.into() => {
                super::steps::asks_for_its_answer(true)
            }
            Pc::Answered => super::steps::asks_for_its_answer(false),
            Pc::Retry => super::steps::asks_again(),
            Pc::Read if next == Pc::Done.into() => {
                crate::said!("reads: none left, sold out", "读取:没有剩余,已经卖完")
            }
            Pc::Read => crate::said!(
                "reads stock {} and its version (try {} of {TRIES})",
                "读到库存 {} 和它的版本号(第 {} 次尝试,最多 {TRIES} 次)";
                after.buyers[i].read, after.buyers[i].tries
            ),
            Pc::Work => crate::said!("ends its work", "完成业务处理"),
            Pc::Write if after.sold != before.sold => {
                let unit = before.buyers[i].read;
                crate::said!("writes: sells unit {unit}", "写入:卖出第 {unit} 件")
            }
            Pc::Write if next == Pc::Read.into() => {
                crate::said!(
                    "writes: no row, the version moved; reads again",
                    "写入:没有行被更新,版本号变了;重新读"
                )
            }
            Pc::Write if before.buyers[i].read != before.stock => {
                crate::said!(
                    "writes: no row, the version moved; gives up after {TRIES} tries (busy)",
                    "写入:没有行被更新,版本号变了;{TRIES} 次尝试后放弃(忙)"
                )
            }
            Pc::Write => crate::said!(
                "writes: refused, its id was answered by another attempt",
                "写入:被拒绝,它的 ID 已由另一次尝试答复"
            ),
            Pc::Done => crate::said!("is done", "结束"),
        }
    }
}
