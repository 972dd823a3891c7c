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

use super::{About, Ctx, Protection};
use crate::ledger;
use crate::sale::Outcome;
use crate::store::StoreError;

pub(super) const ABOUT: About = About {
    protection: "no lock: one atomic Lua script checks, decrements and records the sale",
    explanation: "No lock at all. One Lua script reads the stock, checks it, decrements it and records the sale in the ledger; \
        Redis runs a script to its end before it serves any other command, so nothing can fall between the read and the \
        write. No lease can run out, no pause or crash can open a gap, and it costs one round trip. Its limit is that the \
        business work cannot run inside Redis (work_ms is ignored): it fits stock counters and checks, not calls to other \
        systems. Safe in every scenario of the lab.",
    protection_zh: "不加锁:一个原子 Lua 脚本完成检查、扣减和记账",
    explanation_zh: "完全不用锁。一个 Lua 脚本读取库存、检查、扣减,并在账本中记录这次售出;Redis 会把脚本执行完才处理其他命令,所以读和写之间没有任何缝隙。没有租期会到期,停顿和崩溃也打不开缺口,只需一次往返。它的局限是业务逻辑不能在 Redis 里执行(work_ms 被忽略):适合库存计数和检查,不适合调用其他系统。在本实验的所有场景中都安全。",
    code: r#"
EVAL "local s = tonumber(redis.call('GET', KEYS[1]) or '0')
      if s <= 0 then return {0, 0, s} end
      redis.call('SET', KEYS[1], s - 1)
      record_sale(s)
      return {1, s, s - 1}" stock:{sku} ..."#,
    default_lease: None,
    default_wait: None,
    expected: ["safe", "-", "-", "safe", "-"],
};

static DEDUCT: LazyLock<Script> =
    LazyLock::new(|| ledger::with_ledger(include_str!("../scripts/deduct.lua")));

pub(super) struct LuaScript;

impl Protection for LuaScript {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Outcome, StoreError> {
        let (kind, unit, remaining): (i64, i64, i64) = DEDUCT
            .key(&ctx.keys.stock)
            .key(&ctx.keys.ledger)
            .key(&ctx.keys.units)
            .key(&ctx.keys.served)
            .key(&ctx.keys.requests)
            .arg(ctx.instance)
            .arg(ctx.request_id.unwrap_or(""))
            .arg("1")
            .arg("")
            .invoke_async(&mut ctx.conn)
            .await?;
        // 2 and 3 repeat an earlier answer to the same request_id.
        ctx.replayed = kind >= 2;
        Ok(if kind == 1 || kind == 2 {
            Outcome::Sold { unit, remaining }
        } else {
            Outcome::SoldOut { remaining }
        })
    }
}
