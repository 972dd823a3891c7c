//! `redis-then-pg`: two stores, each step one command of one of them.
//! Redis's pre-decrement takes a unit (one atomic script), or turns the
//! buyer away; the database then sells by the optimistic protocol: read
//! the stock with its version, work, write only if the version is still
//! the one read (a refused write reads again). A buyer the database
//! refuses (its request id answered by another attempt) gives its Redis
//! unit back; one the database finds sold out keeps it taken. A buyer
//! Redis turned away is answered by the database: sold out only when the
//! database has none left, otherwise the same optimistic sale with no
//! Redis unit. `World::stock` and `World::sold` are the database's books
//! (the truth), `World::redis_stock` Redis's. A buyer whose process dies
//! between its pre-decrement and its write leaves Redis a unit short of
//! the database: only the database's answer to the buyers Redis turns
//! away keeps that unit for sale.
//!
//! With request ids in play, a buyer first asks the database for its id's
//! answer (an answered id is answered from there); the write and a
//! sold-out answer record the id, and a write whose id another attempt
//! recorded first is refused (the id's unique key).

use super::steps::{Steps, answer_first};
use super::{At, Sale, World};
use crate::wire::Said;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    /// With request ids in play: asks the database for its id's answer.
    Answered,
    /// Redis's pre-decrement: takes a unit, or is turned away.
    Take,
    /// Turned away by Redis: the database's one statement reads its stock.
    TurnedAway,
    /// The database's read with the version; `true`: it holds a Redis unit.
    Read(bool),
    Work(bool),
    /// The version-checked write.
    Write(bool),
    /// Gives its Redis unit back (`give_back.lua`), the database having
    /// refused the sale.
    GiveBack,
    /// Its write's answer lost: asks again with its request id.
    Retry,
    Done,
}

impl Steps for Pc {
    const DONE: Pc = Pc::Done;

    fn start(sale: &Sale) -> Pc {
        match sale.mutation.no_answer_first {
            true => Pc::Take,
            false => answer_first(sale, Pc::Answered, Pc::Take),
        }
    }

    fn step(self, sale: &Sale, w: &mut World, n: u8) -> Option<Pc> {
        let i = usize::from(n);
        Some(match self {
            // The mutation: a retry goes to Redis first too.
            Pc::Retry if sale.mutation.no_answer_first => Pc::Take,
            Pc::Answered | Pc::Retry if sale.id_recorded(w, n) => Pc::Done,
            Pc::Answered | Pc::Retry => Pc::Take,
            Pc::Take if w.redis_stock > 0 => {
                w.redis_stock -= 1;
                Pc::Read(true)
            }
            // The mutation: Redis's sold-out is the answer by itself.
            Pc::Take if sale.mutation.redis_sold_out_final => {
                w.told_sold_out = true;
                Pc::Done
            }
            Pc::Take => Pc::TurnedAway,
            // Sold out only when the database has none left either.
            Pc::TurnedAway if w.stock == 0 => {
                sold_out(sale, w, n);
                Pc::Done
            }
            Pc::TurnedAway => Pc::Read(false),
            // None left in the database: sold out, and a Redis unit stays
            // taken (Redis's stock comes down to the database's).
            Pc::Read(_) if w.stock == 0 => {
                sold_out(sale, w, n);
                Pc::Done
            }
            Pc::Read(unit) => {
                w.buyers[i].read = w.stock;
                w.buyers[i].work_until = w.now + sale.bounds.work;
                Pc::Work(unit)
            }
            Pc::Work(_) if !sale.worked(w, n) => return None,
            Pc::Work(unit) => Pc::Write(unit),
            // The id's sale made by another attempt: nothing sold, the
            // unit goes back.
            Pc::Write(true) if sale.id_recorded(w, n) => Pc::GiveBack,
            Pc::Write(false) if sale.id_recorded(w, n) => Pc::Done,
            // The version moved (another buyer sold): read again. Each
            // refusal is another buyer's sale, so the code's 100 tries are
            // never used up within the model's stock.
            Pc::Write(unit) if w.buyers[i].read != w.stock => Pc::Read(unit),
            Pc::Write(_) => {
                sale.sell_read(w, n);
                sale.record_answer(w, n, true);
                Pc::Done
            }
            // The mutation keeps the unit taken.
            Pc::GiveBack if sale.mutation.no_give_back => Pc::Done,
            Pc::GiveBack => {
                w.redis_stock += 1;
                Pc::Done
            }
            Pc::Done => return None,
        })
    }

    fn at(self) -> At {
        match self {
            Pc::Answered => At::Claim,
            Pc::Take => At::Start,
            Pc::TurnedAway | Pc::Read(_) => At::Read,
            Pc::Work(_) => At::Work,
            Pc::Write(_) => At::Write,
            Pc::GiveBack => At::Release,
            Pc::Retry => At::Retry,
            Pc::Done => At::Done,
        }
    }

    fn moment(self) -> Said {
        match self {
            Pc::Read(true) | Pc::Work(true) | Pc::Write(true) => crate::said!(
                "between its Redis unit and its write",
                "在 Redis 里扣下一件之后、写数据库之前"
            ),
            pc => pc.at().moment(),
        }
    }

    fn says(self, _: &Sale, before: &World, after: &World, n: u8) -> Said {
        let i = usize::from(n);
        let next = after.buyers[i].pc;
        let redis = after.redis_stock;
        match self {
            Pc::Answered | Pc::Retry if next == Pc::Done.into() => {
                super::steps::asks_for_its_answer(true)
            }
            Pc::Answered => super::steps::asks_for_its_answer(false),
            Pc::Retry => super::steps::asks_again(),
            Pc::Take if after.redis_stock < before.redis_stock => {
                crate::said!(
                    "takes a unit in Redis (Redis has {redis} left)",
                    "在 Redis 里扣下一件(Redis 还剩 {redis} 件)"
                )
            }
            Pc::Take if next == Pc::Done.into() => {
                crate::said!(
                    "is turned away by Redis: told sold out on Redis's word",
                    "被 Redis 拒绝:只凭 Redis 的说法就被告知已经卖完"
                )
            }
            Pc::Take => crate::said!(
                "is turned away by Redis: the database answers",
                "被 Redis 拒绝:由数据库来答复"
            ),
            Pc::TurnedAway | Pc::Read(_) if next == Pc::Done.into() => {
                let told = crate::said!(
                    "reads the database: none left, told sold out",
                    "读数据库:没有剩余,被告知已经卖完"
                );
                match self {
                    Pc::Read(true) => told.then(
                        &Said::default(),
                        &crate::said!(
                            " (its Redis unit stays taken)",
                            "(它在 Redis 里扣下的那一件仍被占着)"
                        ),
                    ),
                    _ => told,
                }
            }
            Pc::TurnedAway => crate::said!(
                "reads the database: {} left, it buys there with no Redis unit",
                "读数据库:还剩 {} 件,它不经 Redis 直接在数据库里买";
                after.stock
            ),
            Pc::Read(_) => crate::said!(
                "reads stock {} and its version",
                "读到库存 {} 和它的版本号";
                after.buyers[i].read
            ),
            Pc::Work(_) => crate::said!("ends its work", "完成业务处理"),
            Pc::Write(_) if after.sold != before.sold => crate::said!(
                "writes: sells unit {}",
                "写入:卖出第 {} 件";
                before.buyers[i].read
            ),
            Pc::Write(_) if matches!(next, super::Pc::RedisThenPg(Pc::Read(_))) => {
                crate::said!(
                    "writes: refused, the version moved; reads again",
                    "写入:被拒绝,版本号变了;重新读"
                )
            }
            Pc::Write(_) => crate::said!(
                "writes: refused, its id was answered by another attempt",
                "写入:被拒绝,它的 ID 已由另一次尝试答复"
            ),
            Pc::GiveBack => crate::said!(
                "gives its unit back to Redis (Redis has {redis} left)",
                "把扣下的那一件还给 Redis(Redis 还剩 {redis} 件)"
            ),
            Pc::Done => crate::said!("is done", "结束"),
        }
    }
}

/// The database tells buyer `n` it is sold out (true of its stock now,
/// which never grows back), recorded for its id.
fn sold_out(sale: &Sale, w: &mut World, n: u8) {
    if !sale.id_recorded(w, n) {
        w.told_sold_out = true;
    }
    sale.record_id(w, n);
}

/// Whether no buyer was told sold out while the database holds stock:
/// once every buyer is done (or dead), a sold-out answer and stock left
/// in the database are a sold-out the database's books do not back (the
/// buyers still on their way to the database may yet sell what it held
/// when it was told).
pub fn sold_out_backed(w: &World) -> bool {
    let quiet = w.buyers.iter().all(|b| b.crashed || b.pc.is_done());
    !(quiet && w.told_sold_out && w.stock > 0)
}
