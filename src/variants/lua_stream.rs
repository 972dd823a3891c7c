//! `lua-stream`: one script sells and enqueues the order: no crash point
//! can separate a sale from its order.
//!
//! The `lua` sale with the order message added by the same script (`XADD`
//! to the SKU's stream): Redis runs it to its end, so a unit is either
//! unsold, or sold with its message on the stream. Workers in a consumer
//! group insert the order into PostgreSQL and ack the message only after
//! the commit; a worker that dies before its ack has its messages
//! redelivered, and the database's unique constraints make the second
//! insert a no-op. The lab's `crash-before-enqueue`, `worker-crash-before-ack`
//! and `postgres-restart` show that no unit is lost and none ordered twice.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::family::SCRIPT_WITH_ORDERS;
use super::lua::{Deducted, Orders, after_sale_failed, answer_of, run_deduct};
use super::{About, Claim, Claims, Protection, Variant};
use crate::section::{Answer, Ctx};
use crate::store::StoreError;

pub(super) const ABOUT: About = About {
    name: "lua-stream",
    protection: "no lock: one Lua script decrements, records the sale and XADDs the order message",
    explanation: "The lua sale and its order in one atomic step: the script decrements the stock, records the sale in the \
        ledger and appends the order message to the SKU's stream (XADD). No crash can come between the sale and its \
        message. Each instance runs a worker in one consumer group: it inserts the orders into PostgreSQL and acks the \
        messages only after the commit; a worker killed before its ack has its messages delivered again (claimed by a \
        live worker after an idle time), and the unique constraints (one order per sale, one live order per unit) make \
        the second insert a no-op. PostgreSQL down: messages wait in the stream, buyers' answers are unaffected. \
        Reservations not paid in time return their unit to the stock, once. stocklock reconcile proves the books match.",
    protection_zh: "不加锁:一个 Lua 脚本完成扣减、记账和 XADD 订单消息",
    explanation_zh: "lua 扣减与订单消息合为一个原子步骤:脚本扣减库存、在账本记下这次售出,并把订单消息追加到该 SKU 的流(XADD)。售出与消息之间不可能插进崩溃。每个实例在同一个消费者组里运行一个订单写入进程:它把订单写入 PostgreSQL,提交之后才确认(`XACK`)消息;确认之前被杀的写入进程,其消息会再次投递(空闲一段时间后被存活的写入进程认领),唯一约束(每次售出一张订单,每件商品只有一张有效订单)让第二次插入什么也不做。PostgreSQL 宕机时,消息在流里等待,买家的答复不受影响。超时未付款的预留把商品还回库存,只还一次。`stocklock reconcile` 证明账目相符。",
    code: r#"
local stock = redis.call('DECR', KEYS[1]) + 1
if stock <= 0 then redis.call('INCR', KEYS[1]) return {0, 0, stock} end
local sale = redis.call('HINCRBY', KEYS[2], 'sold', '1')
redis.call('XADD', KEYS[7], '*', 'unit', unit, 'sale', sale, ...)
return {1, unit, stock - 1, sale, epoch, at}"#,
    default_lease: None,
    default_wait: None,
    claims: Claims {
        crash_before_enqueue: Claim::safe("the order is in the sale's script"),
        ..SCRIPT_WITH_ORDERS
    },
    undersells: None,
    facts: super::Facts {
        orders: true,
        ..super::family::SCRIPT_FACTS
    },
};

/// How often a SKU is put in the workers' registry again (it is lost with
/// a Redis that restarts empty).
const REGISTER_EVERY: Duration = Duration::from_secs(1);

/// The SKUs this process registered, and when.
#[derive(Default)]
pub(super) struct LuaStream {
    registered: Mutex<HashMap<String, Instant>>,
}

impl LuaStream {
    /// Whether `sku` is due to be registered again (and notes that it is).
    fn due(&self, sku: &str) -> bool {
        let mut registered = self.registered.lock().unwrap_or_else(|e| e.into_inner());
        match registered.get(sku) {
            Some(at) if at.elapsed() < REGISTER_EVERY => false,
            _ => {
                registered.insert(sku.to_owned(), Instant::now());
                true
            }
        }
    }
}

impl Protection for LuaStream {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        let keys = ctx.keys;
        match run_deduct(ctx, keys, true, None, Orders::Script).await {
            // Sold and enqueued: whatever fails from here on is counted,
            // never answered as "nothing was sold".
            Ok(Deducted::Order(answer, _)) => {
                match ctx.chaos.crash_before_enqueue(&mut ctx.conn).await {
                    Ok(false) => {}
                    Ok(true) => {
                        let when =
                            "after the sale script (its order already on the stream), as armed";
                        ctx.chaos
                            .crash_recorded(&mut ctx.conn, &keys.tag, when)
                            .await;
                    }
                    Err(err) => {
                        after_sale_failed(ctx, Variant::LuaStream, "chaos_check", &err).await
                    }
                }
                if self.due(&keys.tag)
                    && let Err(err) = crate::orders::register(&mut ctx.conn, &keys.tag).await
                {
                    after_sale_failed(ctx, Variant::LuaStream, "register", &err).await;
                }
                Ok(answer)
            }
            other => answer_of(other),
        }
    }
}
