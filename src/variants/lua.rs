//! `lua`: no lock at all; one script reads, checks, decrements and records.
//!
//! Article 001's closing note: the stock read and write should themselves be
//! atomic. Redis runs a script to its end before serving anything else, so
//! there is no gap between the read and the write for anyone to fall into,
//! and no lease, pause or crash can open one. The fastest variant and the
//! safe one in every scenario; the business work (`work_ms`) cannot run
//! inside Redis, which is its limit: it fits checks and counters, not calls
//! to other systems.

use std::sync::LazyLock;

use redis::Script;

use super::family::SCRIPT;
use super::{About, Protection, Variant};
use crate::knobs::MAX_BUCKETS;
use crate::ledger::{self, Counter};
use crate::section::{Answer, BusyReason, Ctx, Outcome, nothing_sent};
use crate::store::StoreError;

pub(super) const ABOUT: About = About {
    name: "lua",
    protection: "no lock: one atomic Lua script checks, decrements and records the sale",
    explanation: "No lock at all. One Lua script reads the stock, checks it, decrements it and records the sale in the ledger; \
        Redis runs a script to its end before it serves any other command, so nothing can fall between the read and the \
        write. No lease can run out, no pause or crash can open a gap, and it costs one round trip. Its limit is that the \
        business work cannot run inside Redis (work_ms is ignored): it fits stock counters and checks, not calls to other \
        systems. Safe in every scenario of the lab. Once Redis said the SKU is sold out, an instance answers the next \
        buyers itself from a sold-out mark (from_mark in the answer): no round trip, at the price of refusing buyers of \
        stock added meanwhile until the announcement of the reset (or of a unit given back) arrives or the mark's TTL (1 s) is over; a mark never sells.",
    protection_zh: "不加锁:一个原子 Lua 脚本完成检查、扣减和记账",
    explanation_zh: "完全不用锁。一个 Lua 脚本读取库存、检查、扣减,并在账本中记录这次售出;Redis 会把脚本执行完才处理其他命令,所以读和写之间没有任何缝隙。没有租期会到期,停顿和崩溃也打不开缺口,只需一次往返。它的局限是业务逻辑不能在 Redis 里执行(work_ms 被忽略):适合库存计数和检查,不适合调用其他系统。在本实验的所有场景中都安全。Redis 说过该 SKU 已售罄之后,实例凭「售罄标记」自己回答后面的买家(答复中的 from_mark):省去一次往返,代价是在重置(或商品退回库存)的通知到达或标记的 TTL(1 秒)过去之前,会拒绝其间补货的买家;标记永远不会卖出。",
    code: r#"
EVAL "local s = redis.call('DECR', KEYS[1]) + 1
      if s <= 0 then redis.call('INCR', KEYS[1]) return {0, 0, s} end
      record_sale(s)
      return {1, s, s - 1}" stock:{sku} ..."#,
    default_lease: None,
    default_wait: None,
    claims: SCRIPT,
    undersells: None,
    facts: super::family::SCRIPT_FACTS,
};

/// The one-buyer sale (`deduct`), shared by `deduct.lua` and `lua-batch`'s
/// `deduct_batch.lua`.
pub(super) const DEDUCT_ONE_LUA: &str = include_str!("../scripts/deduct_one.lua");

/// `deduct.lua`: one buyer's sale, as `lua` sends it.
pub static DEDUCT: LazyLock<Script> = LazyLock::new(|| {
    ledger::with_ledger(&format!(
        "{DEDUCT_ONE_LUA}\n{}",
        include_str!("../scripts/deduct.lua")
    ))
});

/// Whether a sale becomes an order, and who enqueues it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Orders {
    /// No order (`lua`, `lua-sharded`).
    None,
    /// The caller enqueues the order after the script (`lua-then-queue`).
    Caller,
    /// The script enqueues it itself, in the same atomic step (`lua-stream`).
    Script,
}

impl Orders {
    fn arg(self) -> &'static str {
        match self {
            Orders::None => "",
            Orders::Caller => "queue",
            Orders::Script => "stream",
        }
    }
}

/// What one run of the atomic script says.
pub(super) enum Deducted {
    /// Decided and counted by the script.
    Answer(Answer),
    /// A sale that becomes an order (asked with [`Orders::Caller`] or
    /// [`Orders::Script`]): the answer, and the order's message.
    Order(Answer, crate::orders::OrderMessage),
    /// The caller's bucket count is out of date; the SKU has this many.
    /// Nothing was read or recorded.
    StaleBuckets(u32),
}

/// Runs `deduct.lua` on `keys`: `final_try` false when a sold-out answer
/// here is not the request's last word (lua-sharded tries the next bucket),
/// `buckets` the count a sharded caller believes in, `orders` whether a
/// sale becomes an order.
pub(super) async fn run_deduct(
    ctx: &mut Ctx<'_>,
    keys: &crate::store::Keys,
    final_try: bool,
    buckets: Option<u32>,
    orders: Orders,
) -> Result<Deducted, StoreError> {
    // Made before the script: lua-stream's script writes it with the order.
    let token = (orders != Orders::None).then(crate::orders::new_token);
    let (instance, request_id) = (ctx.instance, ctx.request_id.unwrap_or(""));
    let (request_ttl, ids_per_sku) = (ledger::millis(ctx.request_ttl), ctx.request_ids_per_sku);
    let answer: Vec<i64> =
        crate::store::evalsha(&mut ctx.conn, &DEDUCT, &deduct_keys(keys), |cmd| {
            cmd.arg(instance)
                .arg(request_id)
                .arg(if final_try { "1" } else { "0" });
            match buckets {
                Some(count) => cmd.arg(count),
                None => cmd.arg(""),
            };
            cmd.arg(request_ttl)
                .arg(orders.arg())
                .arg(ids_per_sku)
                .arg(ledger::millis(ledger::SOLD_OUT_KEEP))
                .arg(token.as_deref().unwrap_or(""));
            // A scheduled lua-stream buyer's message carries its schedule
            // (for the worker's gate); nobody else's has the argument.
            if let (Orders::Script, Some(schedule)) = (orders, ctx.schedule) {
                cmd.arg(schedule.to_string());
            }
        })
        .await?;
    deducted(ctx, keys, orders, token, &answer)
}

/// The keys of `deduct.lua` (and of `deduct_batch.lua`), in its order.
pub fn deduct_keys(keys: &crate::store::Keys) -> [&str; 8] {
    [
        &keys.stock,
        &keys.ledger,
        &keys.units,
        &keys.served,
        &keys.requests,
        &keys.request_times,
        &keys.orders,
        &keys.returned_units,
    ]
}

/// What the script's seven numbers for one buyer (`answer`) say, for the
/// buyer of `ctx`: its answer, with its moment on the timeline, and for a
/// sale that becomes an order, the order's message (with `token`).
pub(super) fn deducted(
    ctx: &Ctx<'_>,
    keys: &crate::store::Keys,
    orders: Orders,
    token: Option<String>,
    answer: &[i64],
) -> Result<Deducted, StoreError> {
    let [kind, unit, remaining, started, sale, epoch, at_ms] = answer[..] else {
        return Err(short_answer(answer));
    };
    // The script's moment, as Redis timed it (none when the SKU's timeline is off).
    let answer = |outcome: Outcome, replayed| {
        let mut answer = Answer::recorded(outcome, replayed);
        if started > 0 {
            let at = started as u64 * 1000;
            let mut section = crate::section::ended_as(ctx, None, at, &outcome);
            // A moment inside Redis: it began and ended there.
            section.exit_ns = at;
            section.atomic = true;
            answer.witnessed = Some(Box::new(section));
        }
        answer
    };
    if kind == 1 && orders != Orders::None {
        let message = crate::orders::OrderMessage {
            sku: keys.tag.clone(),
            epoch,
            unit,
            sale,
            request_id: ctx.request_id.map(str::to_owned),
            instance: ctx.instance.to_owned(),
            at_ms,
            token: token.clone(),
            schedule: ctx.schedule.map(ToString::to_string),
        };
        let mut sold = answer(Outcome::Sold { unit, remaining }, false);
        sold.order_token = token;
        return Ok(Deducted::Order(sold, message));
    }
    let answer = |outcome, replayed| Ok(Deducted::Answer(answer(outcome, replayed)));
    match kind {
        1 => answer(Outcome::Sold { unit, remaining }, false),
        2 => answer(Outcome::Sold { unit, remaining }, true),
        0 => answer(Outcome::SoldOut { remaining }, false),
        3 => answer(Outcome::SoldOut { remaining }, true),
        4 => Ok(Deducted::StaleBuckets(
            u32::try_from(unit).unwrap_or(0).min(MAX_BUCKETS),
        )),
        5 => answer(Outcome::Busy(BusyReason::InProgress), false),
        7 => answer(Outcome::Busy(BusyReason::RequestIdsFull), false),
        _ => answer(Outcome::NotStocked, false),
    }
}

/// The answer of a run of the script, whatever it said (an order's
/// message left to the caller that asked for it, before this).
pub(super) fn answer_of(deducted: Result<Deducted, StoreError>) -> Result<Answer, StoreError> {
    match deducted {
        Ok(Deducted::Answer(answer) | Deducted::Order(answer, _)) => Ok(answer),
        // Only lua-sharded asks with a bucket count; a SKU whose layout
        // changed under the request is a reset it met.
        Ok(Deducted::StaleBuckets(_)) => Ok(Answer::unrecorded(Outcome::Busy(BusyReason::Reset))),
        Err(err) => unsent_or_unknown(err),
    }
}

/// A step after the sale script sold failed (`step`: `chaos_check`,
/// `enqueue`, `register`). The sale is written, so the buyer is still told
/// `sold`: a 503 "nothing was sold" would send them back to buy twice. The
/// failure is logged and counted: a metric, and the ledger's
/// `post_sale_failures` if Redis takes it.
pub(super) async fn after_sale_failed(
    ctx: &mut Ctx<'_>,
    variant: Variant,
    step: &'static str,
    err: &StoreError,
) {
    let variant = variant.name();
    tracing::error!(%err, variant, step, sku = %ctx.keys.tag, "a step after a written sale failed; the sale stands");
    crate::metrics::post_sale_failure(variant, step);
    let counted = ledger::add(&mut ctx.conn, ctx.keys, Counter::PostSaleFailures, 1).await;
    if let Err(err) = counted {
        tracing::warn!(%err, "a failure after a sale could not be counted in the ledger");
    }
}

/// The script answered with fewer numbers than it always gives.
pub(super) fn short_answer(answer: &[i64]) -> StoreError {
    StoreError(redis::RedisError::from((
        redis::ErrorKind::UnexpectedReturnType,
        "the sale script's answer is too short",
        format!("{answer:?}"),
    )))
}

/// A failed script: refused before it was sent (nothing happened: the
/// caller answers 503 unavailable), or sent with no answer (unknown).
pub(super) fn unsent_or_unknown(err: StoreError) -> Result<Answer, StoreError> {
    if nothing_sent(&err) {
        return Err(err);
    }
    tracing::warn!(%err, "the sale script was sent and no answer came: outcome unknown");
    Ok(Answer::recorded(Outcome::Unknown, false))
}

pub(super) struct LuaScript;

impl Protection for LuaScript {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        let keys = ctx.keys;
        answer_of(run_deduct(ctx, keys, true, None, Orders::None).await)
    }
}
