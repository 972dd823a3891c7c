//! `pg-update`: the database's atomic decrement. With request ids in play
//! the buyer first asks the database for its id's answer (one statement);
//! then one statement sells: `UPDATE stock SET remaining = remaining - 1
//! WHERE remaining > 0`, the sale's row and the id's answer written with
//! it. The statement is atomic, and the id's unique key refuses it whole
//! when another attempt of the id committed first (its answer replayed).
//! No row (none left): a second statement records the id's sold-out
//! answer. A statement whose answer was lost asks again with its id.
//!
//! Unlike `lua`'s one script, the id's look-up and the sale are two
//! statements: other attempts of the id may come between them, and only
//! the key keeps them to one sale.

use super::steps::{Steps, answer_first};
use super::{At, Sale, World};
use crate::wire::Said;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// With request ids in play: asks the database for its id's answer.
    Answered,
    /// The conditional UPDATE, the sale's row and the id's answer.
    Sell,
    /// No row: records the id's sold-out answer.
    SoldOut,
    /// Its statement's answer lost: asks again with its request id.
    Retry,
    Done,
}

impl Steps for Pc {
    const DONE: Pc = Pc::Done;

    fn start(sale: &Sale) -> Pc {
        answer_first(sale, Pc::Answered, Pc::Sell)
    }

    fn step(self, sale: &Sale, w: &mut World, n: u8) -> Option<Pc> {
        Some(match self {
            Pc::Answered | Pc::Retry if sale.id_recorded(w, n) => Pc::Done,
            Pc::Answered | Pc::Retry => Pc::Sell,
            // The id's key: another attempt committed first, the whole
            // statement is refused and that attempt's answer replayed.
            Pc::Sell if sale.id_recorded(w, n) => Pc::Done,
            Pc::Sell if w.stock > 0 || sale.mutation.no_stock_check => {
                sell(sale, w, n);
                Pc::Done
            }
            Pc::Sell => Pc::SoldOut,
            Pc::SoldOut => {
                sale.record_id(w, n);
                Pc::Done
            }
            Pc::Done => return None,
        })
    }

    fn at(self) -> At {
        match self {
            Pc::Answered => At::Claim,
            Pc::Sell => At::Write,
            Pc::SoldOut => At::After,
            Pc::Retry => At::Retry,
            Pc::Done => At::Done,
        }
    }

    fn moment(self) -> Said {
        match self {
            Pc::Sell => crate::said!("before its UPDATE", "在 UPDATE 之前"),
            pc => pc.at().moment(),
        }
    }

    fn says(self, _: &Sale, before: &World, after: &World, n: u8) -> Said {
        let next = after.buyers[usize::from(n)].pc;
        match self {
            Pc::Answered | Pc::Retry if next == Pc::Done.into() => {
                super::steps::asks_for_its_answer(true)
            }
            Pc::Answered => super::steps::asks_for_its_answer(false),
            Pc::Retry => super::steps::asks_again(),
            Pc::Sell if after.sold != before.sold => crate::said!(
                "UPDATE ... WHERE remaining > 0: sells unit {}",
                "UPDATE ... WHERE remaining > 0:卖出第 {} 件";
                after.buyers[usize::from(n)].read
            ),
            Pc::Sell if next == Pc::Done.into() => {
                crate::said!(
                    "UPDATE: refused whole, its id was answered by another attempt",
                    "UPDATE:整条被拒绝,它的 ID 已由另一次尝试答复"
                )
            }
            Pc::Sell => crate::said!(
                "UPDATE ... WHERE remaining > 0: no row, none left",
                "UPDATE ... WHERE remaining > 0:没有行被更新,没有剩余"
            ),
            Pc::SoldOut => {
                crate::said!(
                    "records its id's answer: sold out",
                    "记下它的 ID 的答复:已经卖完"
                )
            }
            Pc::Done => crate::said!("is done", "结束"),
        }
    }
}

/// The statement's sale: the unit is the stock before the decrement (with
/// the condition taken out, past zero: a unit that never existed, counted
/// as the first one sold again).
fn sell(sale: &Sale, w: &mut World, n: u8) {
    let i = usize::from(n);
    let unit = w.stock;
    w.stock = w.stock.saturating_sub(1);
    let at = usize::from(unit.max(1) - 1);
    w.sold[at] = w.sold[at].saturating_add(1);
    w.buyers[i].read = unit;
    sale.sold_by(w, n);
    sale.record_answer(w, n, true);
}
