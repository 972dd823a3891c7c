//! What the checker looks for in each cell: the properties a
//! counterexample breaks, and the witnesses a verdict with no
//! counterexample rests on.

use super::model::{self, Sale, World};
use super::pipeline;
use crate::wire::Said;

/// What the checker looks for: properties that must hold in every state
/// (a counterexample breaks one), and witnesses, states that must be
/// reachable (a found schedule shows one: a verdict rests on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Property {
    /// No unit sold twice (and so never more than the stock).
    Safety,
    /// The SKU can still be sold: no lock that nobody can ever free.
    Stuck,
    /// A release frees only its own lock.
    OwnLock,
    /// One sale per request id (retries of one, or each buyer's own).
    OneSale,
    /// The order pipeline: each sale one order, each unit given back once.
    OrderedOnce,
    /// The order pipeline: every sale reaches its order.
    OrdersKept,
    /// Nothing sells while fewer than a majority of Redlock's nodes are up.
    NoSaleWhileDown,
    /// Two stores (`redis-then-pg`): no buyer is told sold out while the
    /// database, whose books are the truth, holds stock.
    SoldOutBacked,
    /// Witness: a unit is sold once each fault of the scenario struck
    /// (after a holder froze, a call was cut off, the lock vanished, the
    /// failover, a commit's answer lost, ...; after Redis came back, if it
    /// went down; after a database crash that ended an attempt, if one may
    /// strike).
    Sells,
    /// Witness: a lock holder dies, and another buyer sells within a lease
    /// and a tick of its death.
    Frees,
    /// Witness: a database lock's holder frozen past its lease, its session
    /// ended by the database (its idle timeout), and another buyer sells
    /// (the holder's late write refused).
    SilenceEnded,
    /// Witness: the whole stock sold, each unit once, through the fault
    /// (a unit sold once each fault of the scenario struck).
    SellsAll,
}

impl Property {
    /// The name a trace or a witness is reported under.
    pub fn name(self) -> &'static str {
        match self {
            Property::Safety => "every unit sold at most once",
            Property::Stuck => "the SKU can still be sold",
            Property::OwnLock => "a release frees only its own lock",
            Property::OneSale => "one sale per request id",
            Property::OrderedOnce => "each sale one order, each unit given back once",
            Property::OrdersKept => "every sale reaches its order",
            Property::NoSaleWhileDown => "nothing sold while Redlock has no majority up",
            Property::SoldOutBacked => "no buyer told sold out while the database holds stock",
            Property::Sells => "a unit is sold",
            Property::Frees => "another buyer sells within a lease of the holder's death",
            Property::SilenceEnded => {
                "another buyer sells once the database ended a silent holder's session"
            }
            Property::SellsAll => "the whole stock sold, each unit once",
        }
    }

    /// The name in Chinese, for the pages ([`Property::name`]'s words).
    pub fn name_zh(self) -> &'static str {
        match self {
            Property::Safety => "每件商品最多卖出一次",
            Property::Stuck => "这个 SKU 仍然卖得出去",
            Property::OwnLock => "释放锁时只释放自己的锁",
            Property::OneSale => "每个请求 ID 只成交一次",
            Property::OrderedOnce => "每笔成交一个订单,每件商品只还回一次",
            Property::OrdersKept => "每笔成交都会生成它的订单",
            Property::NoSaleWhileDown => "Redlock 没有多数节点在线时,什么都不卖",
            Property::SoldOutBacked => "数据库还有库存时,不告诉任何买家已经卖完",
            Property::Sells => "卖出一件商品",
            Property::Frees => "持有者死后一个租约之内,另一个买家卖出",
            Property::SilenceEnded => "数据库结束沉默持有者的会话之后,另一个买家卖出",
            Property::SellsAll => "全部库存卖完,每件只卖一次",
        }
    }

    /// The name in both languages.
    pub fn said(self) -> Said {
        Said {
            en: self.name().to_owned(),
            zh: self.name_zh().to_owned(),
        }
    }

    /// Every property, in the order of the enum.
    pub const ALL: [Property; 12] = [
        Property::Safety,
        Property::Stuck,
        Property::OwnLock,
        Property::OneSale,
        Property::OrderedOnce,
        Property::OrdersKept,
        Property::NoSaleWhileDown,
        Property::SoldOutBacked,
        Property::Sells,
        Property::Frees,
        Property::SilenceEnded,
        Property::SellsAll,
    ];

    /// Whether it is a witness (a state to reach), not a property to keep.
    pub fn is_witness(self) -> bool {
        matches!(
            self,
            Property::Sells | Property::Frees | Property::SilenceEnded | Property::SellsAll
        )
    }
}

impl std::fmt::Display for Property {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for Property {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// Whether `property` holds in `w` (for a witness: whether `w` is the
/// state it looks for).
pub fn holds(property: Property, sale: &Sale, w: &World) -> bool {
    match property {
        Property::Safety => model::sold_each_unit_once(w),
        Property::Stuck => !model::stuck(w),
        Property::OwnLock => !w.freed_anothers,
        Property::OneSale => {
            (!sale.bounds.one_request || model::one_sale_per_request(w))
                && w.script_sales.iter().all(|&n| n <= 1)
        }
        Property::OrderedOnce => pipeline::ordered_once(w),
        Property::OrdersKept => pipeline::orders_kept(w),
        Property::NoSaleWhileDown => !w.sold_while_down,
        Property::SoldOutBacked => model::redis_then_pg::sold_out_backed(w),
        Property::Sells => {
            w.sold.iter().any(|&n| n > 0)
                && w.sold_after_faults
                && (sale.bounds.outages == 0 || w.redis == model::Outage::Back)
                && (sale.bounds.db_crashes == 0 || w.sold_since_crash)
        }
        Property::Frees | Property::SilenceEnded => w.freed,
        Property::SellsAll => w.stock == 0 && w.sold.iter().all(|&n| n == 1) && w.sold_after_faults,
    }
}
