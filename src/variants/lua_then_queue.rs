//! `lua-then-queue`: the `lua` sale, then the order message in a second
//! command: the naive road from stock to order.
//!
//! The sale is as safe as `lua`'s: one script decrements and records. But
//! the order is enqueued afterwards, with its own `XADD`, and anything that
//! stops the instance between the two (a crash, a deploy, a client that
//! hangs up and cancels the handler) leaves a unit that Redis says is sold
//! and that no order will ever name: under-selling (少卖). The lab's
//! `crash-before-enqueue` shows it; `stocklock reconcile` finds the unit.

use super::family::SCRIPT_WITH_ORDERS;
use super::lua::{Deducted, Orders, after_sale_failed, answer_of, run_deduct};
use super::{About, Claim, Claims, Protection, Variant};
use crate::section::{Answer, Ctx};
use crate::store::StoreError;

pub(super) const ABOUT: About = About {
    name: "lua-then-queue",
    protection: "the lua sale, then a separate XADD of the order: a crash in between loses the unit",
    explanation: "The sale is the lua script: atomic, it never oversells. The order is sent afterwards, by a second command \
        (XADD to the SKU's order stream) that a worker turns into an order row in PostgreSQL. Between the two the unit \
        is sold in Redis and nowhere else: an instance that crashes there, or a handler cancelled because its client \
        hung up, leaves a unit sold with no order ever to come (under-selling). The lab's crash-before-enqueue arms a \
        crash at exactly that point; stocklock reconcile lists the lost unit. The fix is lua-stream: the XADD inside \
        the script.",
    protection_zh: "先用 lua 扣减,再单独 XADD 订单消息:两步之间崩溃就丢了这件商品",
    explanation_zh: "扣减就是 lua 脚本:原子的,不会超卖。订单消息随后由第二条命令(XADD 到该 SKU 的订单流)发出,由订单写入进程写成 PostgreSQL 里的订单行。两步之间,这件商品在 Redis 里已卖出,别处却没有记录:实例在这里崩溃,或客户端断开导致处理被取消,这件商品就卖出了却永远不会有订单(少卖)。实验的 crash-before-enqueue 恰好在这一点安排崩溃;`stocklock reconcile` 会列出丢失的商品。修正办法是 lua-stream:把 XADD 放进脚本里。",
    code: r#"
let sold = EVAL deduct.lua stock:{sku} ...;   // atomic: decrement + ledger
// <- a crash here: sold in Redis, no order ever
XADD orders:{sku} * unit .. sale .. epoch ..; // a second command"#,
    default_lease: None,
    default_wait: None,
    claims: Claims {
        pause_holder: Claim::not_applicable("no gap in the sale: one script"),
        crash_before_enqueue: Claim::loses_units("the crash comes between the sale and its XADD"),
        ..SCRIPT_WITH_ORDERS
    },
    undersells: None,
    facts: super::Facts {
        orders: true,
        ..super::family::SCRIPT_FACTS
    },
};

pub(super) struct LuaThenQueue;

impl Protection for LuaThenQueue {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        let keys = ctx.keys;
        match run_deduct(ctx, keys, true, None, Orders::Caller).await {
            // Sold: whatever fails from here on is counted, never answered
            // as "nothing was sold". A failed XADD is a unit sold with no
            // order, this variant's lesson, which reconcile lists.
            Ok(Deducted::Order(answer, message)) => {
                ctx.hook.at(crate::gate::points::BEFORE_ENQUEUE).await;
                match ctx.chaos.crash_before_enqueue(&mut ctx.conn).await {
                    Ok(false) => {}
                    Ok(true) => {
                        let when = "after the sale, before its XADD, as armed";
                        ctx.chaos
                            .crash_recorded(&mut ctx.conn, &keys.tag, when)
                            .await;
                    }
                    Err(err) => {
                        after_sale_failed(ctx, Variant::LuaThenQueue, "chaos_check", &err).await
                    }
                }
                if let Err(err) = crate::orders::enqueue(&mut ctx.conn, keys, &message).await {
                    after_sale_failed(ctx, Variant::LuaThenQueue, "enqueue", &err).await;
                }
                Ok(answer)
            }
            other => answer_of(other),
        }
    }
}
