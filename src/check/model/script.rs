//! The `lua` family: the whole sale is one script, which Redis runs to its
//! end: no lock. An id with a record is answered from it; otherwise the
//! script sells a unit (one given back first), records the id, and for
//! `lua-stream` adds the order's message. `lua-then-queue` adds it with a
//! second command after the script. A call cut off by a paused Redis is
//! told `unknown`; the buyer asks again with its request id.

use super::steps::Steps;
use super::{At, Sale, World};
use crate::check::protocol::Enqueue;
use crate::wire::Said;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    Script,
    /// `lua-then-queue`: XADD its sale's order message, after the script.
    Enqueue,
    /// Told `unknown` (its call cut off): ask again with its request id.
    Retry,
    Done,
}

impl Steps for Pc {
    const DONE: Pc = Pc::Done;

    /// The script checks the request id itself: no claim first.
    fn start(_: &Sale) -> Pc {
        Pc::Script
    }

    fn step(self, sale: &Sale, w: &mut World, n: u8) -> Option<Pc> {
        Some(match self {
            Pc::Script => {
                let sold = sale.script(w, n);
                match sale.protocol.enqueue {
                    Enqueue::AfterScript if sold && sale.bounds.orders.is_some() => Pc::Enqueue,
                    _ => Pc::Done,
                }
            }
            Pc::Enqueue => {
                sale.enqueue(w, n);
                Pc::Done
            }
            Pc::Retry => {
                sale.script(w, n);
                Pc::Done
            }
            Pc::Done => return None,
        })
    }

    fn at(self) -> At {
        match self {
            Pc::Script => At::Start,
            Pc::Enqueue => At::After,
            Pc::Retry => At::Retry,
            Pc::Done => At::Done,
        }
    }

    fn says(self, sale: &Sale, before: &World, after: &World, n: u8) -> Said {
        match self {
            Pc::Script => {
                let in_script = sale.bounds.orders.is_some()
                    && sale.protocol.enqueue == Enqueue::InScript
                    && sold(before, after, n);
                let result = says_result(sale, before, n, after);
                let said = Said {
                    en: format!("{} in one script", result.en),
                    zh: format!("在一个脚本里{}", result.zh),
                };
                match in_script {
                    true => said.then(
                        &Said::default(),
                        &crate::said!(" (its order's message in it)", "(订单消息也在这个脚本里)"),
                    ),
                    false => said,
                }
            }
            Pc::Enqueue => {
                crate::said!("adds its order's message (XADD)", "添加它的订单消息(XADD)")
            }
            Pc::Retry => {
                let result = says_result(sale, before, n, after);
                Said {
                    en: format!("asks again with its request id: {}", result.en),
                    zh: format!("用它的请求 ID 再问一次:{}", result.zh),
                }
            }
            Pc::Done => crate::said!("is done", "结束"),
        }
    }
}

impl Sale {
    /// The request id whose record the sale's script checks for buyer `n`:
    /// 0 when every buyer retries one, its own with cut-off calls, none
    /// without ids (or with the record taken out).
    pub(in crate::check) fn script_id(&self, n: u8) -> Option<u8> {
        match () {
            _ if self.mutation.no_request_claim => None,
            _ if self.bounds.one_request => Some(0),
            _ if self.bounds.cutoffs > 0 || self.ids_in_commits() => Some(n),
            _ => None,
        }
    }

    /// Whether buyers carry request ids whose sales are counted (every
    /// buyer a retry of one, or each asking again with its own).
    pub(in crate::check) fn ids_in_play(&self) -> bool {
        self.bounds.one_request || self.ids_in_commits()
    }

    /// Whether the store has an answer recorded for buyer `n`'s request id.
    pub(in crate::check) fn id_recorded(&self, w: &World, n: u8) -> bool {
        self.script_id(n)
            .is_some_and(|id| w.answered & (1 << id) != 0)
    }

    /// Records buyer `n`'s request id's answer (a first answer only: the
    /// id's unique key keeps the first).
    pub(in crate::check) fn record_id(&self, w: &mut World, n: u8) {
        if let Some(id) = self.script_id(n) {
            w.answered |= 1 << id;
        }
    }

    /// A database's sale or sold-out answer, committed with the request
    /// id's answer: recorded for the id, and a sale counted under it
    /// (one per id, the property says).
    pub(in crate::check) fn record_answer(&self, w: &mut World, n: u8, sold: bool) {
        self.record_id(w, n);
        if sold && self.ids_in_play() {
            w.script_sales[usize::from(n)] += 1;
        }
    }

    /// The sale's script, run by Redis to its end. Whether it sold.
    pub(in crate::check) fn script(&self, w: &mut World, n: u8) -> bool {
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
}

/// Whether buyer `n`'s sale script sold a unit between `before` and `after`.
pub fn sold(before: &World, after: &World, n: u8) -> bool {
    let i = usize::from(n);
    after.script_sales[i] > before.script_sales[i]
}

/// What buyer `n`'s script did: sold, answered from its id's record, or
/// found the SKU sold out.
pub fn says_result(sale: &Sale, before: &World, n: u8, after: &World) -> Said {
    let recorded = sale
        .script_id(n)
        .is_some_and(|id| before.answered & (1 << id) != 0);
    if sold(before, after, n) {
        let unit = after.buyers[usize::from(n)].read;
        crate::said!("sells unit {unit}", "卖出第 {unit} 件")
    } else if recorded {
        crate::said!(
            "its id has a record: answered from it, nothing sold",
            "它的 ID 有记录:按记录答复,什么都没卖"
        )
    } else {
        crate::said!("finds it sold out", "发现已经卖完")
    }
}
