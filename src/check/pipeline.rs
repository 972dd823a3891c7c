//! The order pipeline as the model runs it (`lua-then-queue`,
//! `lua-stream`): each sale's order message on the SKU's stream (added by
//! the sale's script itself, or by a second command after it), the worker
//! that turns a message into an order row in PostgreSQL and acks it only
//! after the commit, the reservations that are paid or expire and give
//! their unit back, and the faults that strike it: the worker dying between
//! its commit and its XACK, PostgreSQL stopping, Redis restarting empty.
//!
//! Messages are read one at a time; a message left pending (its worker
//! died, or its insert failed) may be claimed again at any later step,
//! which stands for the claim after it sat idle long enough. The INSERT
//! and its COMMIT are one step, as a transaction is; a payment and an
//! expiry of one reservation are each one step (row locks order them, and
//! the deadline decides which comes first: either may).

use super::model::{Action, Sale, World};
use super::order::{Message, Order, OrderStep, Status};
use super::protocol::Enqueue;
use crate::wire::Said;

impl Sale {
    /// Buyer `n` sold `unit`: its order, whose message the script added
    /// (`lua-stream`) or the buyer will add next (`lua-then-queue`).
    pub(super) fn order(&self, w: &mut World, n: u8, unit: u8) {
        let message = match self.protocol.enqueue {
            Enqueue::InScript => Message::New,
            _ => Message::Unsent,
        };
        w.pipeline.orders.push(Order {
            buyer: n,
            unit,
            message,
            rows: 0,
            status: Status::Reserved,
            returns: 0,
        });
    }

    /// Buyer `n`'s XADD of its sale's order message.
    pub(super) fn enqueue(&self, w: &mut World, n: u8) {
        let unsent = w.pipeline.orders.iter_mut().rev();
        if let Some(order) = unsent
            .filter(|o| o.buyer == n)
            .find(|o| o.message == Message::Unsent)
        {
            order.message = Message::New;
        }
    }

    /// The order pipeline's steps possible now.
    pub(super) fn order_actions(&self, w: &World, actions: &mut Vec<Action>) {
        let Some(faults) = self.bounds.orders else {
            return;
        };
        let p = &w.pipeline;
        let waiting = p
            .orders
            .iter()
            .any(|o| matches!(o.message, Message::New | Message::Pending));
        let mut push = |step| actions.push(Action::Order(step));
        if p.worker.is_some() || waiting {
            push(OrderStep::Worker);
        }
        if p.worker.is_some_and(|(_, committed)| committed)
            && p.worker_crashes < faults.worker_crashes
        {
            push(OrderStep::WorkerCrash);
        }
        if p.postgres_down {
            push(OrderStep::PostgresStart);
        } else if p.postgres_stops < faults.postgres_stops {
            push(OrderStep::PostgresStop);
        }
        if faults.reservations && !p.postgres_down {
            for (s, order) in p.orders.iter().enumerate() {
                let s = s as u8;
                if order.rows > 0 && order.status == Status::Reserved {
                    push(OrderStep::Pay(s));
                    push(OrderStep::Expire(s));
                }
                if order.status == Status::Expired {
                    push(OrderStep::GiveBack(s));
                    if order.returns > 0 {
                        push(OrderStep::Record(s));
                    }
                }
            }
        }
        if p.data_losses < faults.data_losses && waiting {
            push(OrderStep::DataLoss);
        }
    }

    pub(super) fn order_step(&self, w: &mut World, step: OrderStep) {
        let p = &mut w.pipeline;
        match step {
            OrderStep::Worker => match p.worker {
                None => {
                    // The oldest new message, or else one left pending.
                    let next = p
                        .orders
                        .iter()
                        .position(|o| o.message == Message::New)
                        .or_else(|| p.orders.iter().position(|o| o.message == Message::Pending));
                    if let Some(s) = next {
                        p.orders[s].message = Message::Pending;
                        p.worker = Some((s as u8, false));
                    }
                }
                // The insert fails: no ack, the message stays pending.
                Some((_, false)) if p.postgres_down => p.worker = None,
                Some((s, false)) => {
                    // INSERT ... ON CONFLICT (the sale) DO NOTHING, committed.
                    let order = &mut p.orders[usize::from(s)];
                    if order.rows == 0 || self.mutation.no_on_conflict {
                        order.rows += 1;
                    }
                    p.worker = Some((s, true));
                }
                Some((s, true)) => {
                    let order = &mut p.orders[usize::from(s)];
                    order.message = Message::Acked;
                    p.worker = None;
                }
            },
            OrderStep::WorkerCrash => {
                p.worker_crashes += 1;
                p.worker = None;
            }
            OrderStep::PostgresStop => {
                p.postgres_stops += 1;
                p.postgres_down = true;
            }
            OrderStep::PostgresStart => p.postgres_down = false,
            OrderStep::Pay(s) => p.orders[usize::from(s)].status = Status::Paid,
            OrderStep::Expire(s) => p.orders[usize::from(s)].status = Status::Expired,
            OrderStep::GiveBack(s) => {
                let order = &mut p.orders[usize::from(s)];
                // give_back.lua records the sale's return (HSETNX) first: once.
                if order.returns == 0 || self.mutation.no_give_back_once {
                    order.returns += 1;
                    let unit = order.unit;
                    w.stock += 1;
                    w.returned |= 1 << (unit - 1);
                    let times = &mut w.sold[usize::from(unit) - 1];
                    *times = times.saturating_sub(1);
                }
            }
            OrderStep::Record(s) => p.orders[usize::from(s)].status = Status::Recorded,
            OrderStep::DataLoss => {
                p.data_losses += 1;
                let held = p.worker.map(|(s, _)| usize::from(s));
                for (s, order) in p.orders.iter_mut().enumerate() {
                    // A message the worker holds is in its memory still.
                    let in_redis = order.message == Message::New
                        || (order.message == Message::Pending && held != Some(s));
                    if in_redis {
                        order.message = Message::Lost;
                    }
                }
                self.reset(w);
            }
        }
    }
}

/// No sale has two order rows, and no unit went back to the stock twice
/// or after it was paid for.
pub fn ordered_once(w: &World) -> bool {
    w.pipeline
        .orders
        .iter()
        .all(|o| o.rows <= 1 && o.returns <= 1 && !(o.status == Status::Paid && o.returns > 0))
}

/// No sale is lost on its way to its order: its message gone with Redis
/// (no row written), acked with no row, or never added by a buyer that died.
pub fn orders_kept(w: &World) -> bool {
    !w.pipeline.orders.iter().any(|o| lost(w, o))
}

/// Whether sale `o` will never reach its order.
pub fn lost(w: &World, o: &Order) -> bool {
    match o.message {
        Message::Lost | Message::Acked => o.rows == 0,
        Message::Unsent => w.buyers[usize::from(o.buyer)].crashed,
        Message::New | Message::Pending => false,
    }
}

/// What `step` did, in words.
pub fn describe(before: &World, step: OrderStep, after: &World) -> Said {
    let (was, now) = (&before.pipeline, &after.pipeline);
    // Sale `s` said inside a sentence: `en` and `zh` are format strings
    // whose `{}` is the sale ("A's order (unit 1)", "A 的订单(第 1 件)").
    let of = |s: u8, en: &str, zh: &str| {
        let order = now.orders[usize::from(s)];
        let (buyer, unit) = (char::from(b'A' + order.buyer), order.unit);
        Said {
            en: en.replace("{}", &format!("{buyer}'s order (unit {unit})")),
            zh: zh.replace("{}", &format!("{buyer} 的订单(第 {unit} 件)")),
        }
    };
    match step {
        OrderStep::Worker => match (was.worker, now.worker) {
            (None, Some((s, _))) => {
                let claimed = was.orders[usize::from(s)].message == Message::Pending;
                match claimed {
                    true => of(
                        s,
                        "the worker claims {}, left pending",
                        "工作进程认领 {},它此前一直待处理",
                    ),
                    false => of(
                        s,
                        "the worker reads {} (XREADGROUP)",
                        "工作进程读到 {}(XREADGROUP)",
                    ),
                }
            }
            (Some((s, false)), None) => of(
                s,
                "the worker's insert of {} fails: PostgreSQL is down",
                "工作进程插入 {} 失败:PostgreSQL 宕机了",
            ),
            (Some((s, false)), Some(_)) => {
                let rows = now.orders[usize::from(s)].rows;
                let written = was.orders[usize::from(s)].rows < rows;
                match written {
                    true => of(
                        s,
                        "the worker inserts {} and commits",
                        "工作进程插入 {} 并提交",
                    ),
                    false => of(
                        s,
                        "the worker's insert of {} finds its row: no change",
                        "工作进程插入 {} 时发现它的行已经在了:没有变化",
                    ),
                }
            }
            (Some((s, true)), _) => of(s, "the worker acks {} (XACK)", "工作进程确认 {}(XACK)"),
            (None, None) => {
                crate::said!("the worker finds nothing to read", "工作进程没有可读的消息")
            }
        },
        OrderStep::WorkerCrash => crate::said!(
            "the worker dies after its commit, before its XACK",
            "工作进程在提交之后、XACK 之前死掉"
        ),
        OrderStep::PostgresStop => crate::said!("PostgreSQL stops", "PostgreSQL 停止"),
        OrderStep::PostgresStart => crate::said!("PostgreSQL starts again", "PostgreSQL 重新启动"),
        OrderStep::Pay(s) => of(s, "{} is paid", "{} 已支付"),
        OrderStep::Expire(s) => of(
            s,
            "the expiry pass cancels {}, unpaid",
            "过期清理取消了未支付的 {}",
        ),
        OrderStep::GiveBack(s) => {
            match now.orders[usize::from(s)].returns > was.orders[usize::from(s)].returns {
                true => of(
                    s,
                    "the expiry pass gives back the unit of {}",
                    "过期清理把 {} 的那一件还回库存",
                ),
                false => of(
                    s,
                    "the expiry pass finds {} given back already: no change",
                    "过期清理发现 {} 已经还回:没有变化",
                ),
            }
        }
        OrderStep::Record(s) => of(
            s,
            "the expiry pass records {} given back",
            "过期清理记下 {} 已经还回",
        ),
        OrderStep::DataLoss => crate::said!(
            "Redis restarts empty (the stream's messages with it); the SKU is reset",
            "Redis 重启后数据全空(消息流里的消息也一起没了);这个 SKU 被重置"
        ),
    }
}
