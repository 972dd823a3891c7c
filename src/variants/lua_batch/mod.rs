//! `lua-batch`: the `lua` script, one call for all the buyers of a SKU
//! that queued at an instance while its previous call was in flight.
//!
//! When the round trip is the cost: a group commit. Each instance keeps a
//! queue per SKU; one call of `deduct_batch.lua` sells to up to N of its
//! buyers (`serve --batch-max`, 64 by default) in queue order, each with
//! its own unit or sold-out answer and its request id checked and
//! recorded, exactly as `lua` would sell them one after the other. The
//! script is coalesced: it decides every buyer on one read of the stock,
//! then writes the batch's sales together (one `DECRBY`, `sold` counted
//! once, the units in one `BITFIELD`, the ids' records in one `HSET`), so
//! a batch of k costs Redis about one sale plus a small part per buyer.
//! No timer: a buyer who finds nothing in flight is sent at once, alone.
//! Safe where `lua` is; a call whose answer never came leaves all its
//! buyers `unknown`, each request id resolving later.

#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::{Arc, LazyLock};

use redis::Script;
use tokio::sync::oneshot;

use super::family::SCRIPT;
use super::lane::{Driving, Lane, Lanes};
use super::lua::{DEDUCT_ONE_LUA, Orders, answer_of, deduct_keys, deducted, short_answer};
use super::{About, Claim, Claims, Protection};
use crate::ledger;
use crate::section::{Answer, Ctx, Outcome};
use crate::store::{Conn, Keys, StoreError};

/// One call's word for one buyer: its seven numbers, or why there are none.
type Reply = Result<Vec<i64>, StoreError>;

/// A buyer waiting in a lane: its request id and where its reply goes.
struct Buyer {
    request_id: String,
    reply: oneshot::Sender<Reply>,
}

pub(super) const ABOUT: About = About {
    name: "lua-batch",
    protection: "no lock: the lua script, one call for all the buyers of a SKU queued at an instance (up to 64)",
    explanation: "When the round trip is the cost. The lua variant does a few microseconds of work inside Redis; most of what \
        a sale costs is the trip there and back (system calls on both sides, a wake-up, a parse). Here each instance keeps a \
        queue per SKU and sends its waiting buyers to Redis together: one call of the same atomic script sells to up to 64 \
        of them (`serve --batch-max`), in queue order, each with its own unit or its own sold-out answer, its request_id \
        checked and recorded, every sale in the ledger, exactly as lua would sell them one after the other. The script \
        decides the whole batch on one read of the stock and writes its sales together (one DECRBY, the sold count once, \
        the units in one BITFIELD, the ids' records in one HSET), so a batch costs Redis little more than one sale. No timer: a buyer who finds no call in \
        flight is sent at once, alone, so a lone buyer waits for nobody; the next batch is whoever queued while the \
        previous call was in flight. Safe wherever lua is. A call whose answer never came leaves every buyer in it in \
        doubt (unknown), each request_id resolving later as its record says. The price is that one slow call delays the \
        whole batch behind it.",
    protection_zh: "不加锁:同一个 lua 脚本,一次调用卖给在实例上排队的同一 SKU 的所有买家(最多 64 个)",
    explanation_zh: "当往返本身就是成本时。lua 变体在 Redis 里只做几微秒的工作;一次销售的大部分成本是往返(两端的系统调用、唤醒、解析)。这里每个实例为每个 SKU 维护一个队列,把等待中的买家一起发给 Redis:同一个原子脚本的一次调用按排队顺序卖给最多 64 个买家(`serve --batch-max`),每个买家得到自己的那一件或自己的售罄答复,各自的 request_id 被检查和记录,每笔销售都记入账本,和 lua 一个接一个地卖完全一样。脚本在一次读取库存后决定整批的结果,再把这批销售一起写入(一次 DECRBY、销量计数一次、所有件号一次 BITFIELD、所有 id 的记录一次 HSET),所以一批的 Redis 成本只比一次销售多一点。没有定时器:发现没有调用在途的买家会被立即单独发送,所以单个买家不用等任何人;下一批就是上一次调用在途期间排队的买家。lua 安全的地方它都安全。一次没有收到答复的调用,其中每个买家都处于不确定状态(`unknown`),各自的 request_id 之后按记录给出结果。代价是:一次慢调用会拖慢它后面的整批买家。",
    code: r#"
queue[sku].push(buyer)                        // this instance's buyers of the SKU
if nothing in flight for sku:                 // no timer: a lone buyer goes at once
    spawn: while let batch = queue[sku].take(64) {
        // one atomic call: decide every buyer on one read, then write once
        EVAL "stock = GET; for each buyer: replay | busy | unit = stock-- | sold out;
              DECRBY n; HINCRBY sold n; BITFIELD units; HSET ids" stock:{sku} ... ids
        each buyer gets its own seven numbers   // or all get unknown
    }
await my answer"#,
    default_lease: None,
    default_wait: None,
    // The lua family's claims: the same script, sent for several buyers at once.
    claims: Claims {
        pause_holder: Claim::not_applicable("no gap: one script per batch"),
        redis_pause: Claim::safe("cut-off batches: every id resolves"),
        ..SCRIPT
    },
    undersells: None,
    facts: super::family::SCRIPT_FACTS,
};

/// Buyers per call unless `serve --batch-max` says otherwise.
pub const DEFAULT_BATCH_MAX: usize = 64;

/// The most `serve --batch-max` may ask for: a call's arguments and answer
/// stay small (7 numbers a buyer), and Redis serves nothing else while it runs.
pub const MAX_BATCH_MAX: usize = 1024;

/// `deduct_batch.lua`: one call for a batch of buyers, as `lua-batch` sends it.
pub static DEDUCT_BATCH: LazyLock<Script> = LazyLock::new(|| {
    ledger::with_ledger(&format!(
        "{DEDUCT_ONE_LUA}\n{}",
        include_str!("../../scripts/deduct_batch.lua")
    ))
});

/// Sends `lane`'s batches through `send` until nobody waits: each batch is
/// whoever queued while the previous call was in flight. `send` gets the
/// batch's request ids ("" for none) and returns 7 numbers per buyer.
async fn drive<S, F>(lane: Arc<Lane<Buyer>>, max: usize, mut send: S)
where
    S: FnMut(Vec<String>) -> F,
    F: Future<Output = Result<Vec<i64>, StoreError>>,
{
    let driving = Driving::of(lane.clone());
    while let Some(batch) = lane.next(max) {
        let (ids, replies): (Vec<String>, Vec<_>) =
            batch.into_iter().map(|b| (b.request_id, b.reply)).unzip();
        let n = ids.len();
        crate::metrics::batch_sent(n);
        match send(ids).await {
            Ok(numbers) if numbers.len() == 7 * n => {
                for (reply, answer) in replies.into_iter().zip(numbers.chunks(7)) {
                    // A buyer who hung up meanwhile: its sale stands all the same.
                    let _ = reply.send(Ok(answer.to_vec()));
                }
            }
            Ok(numbers) => {
                let err = short_answer(&numbers);
                for reply in replies {
                    let _ = reply.send(Err(StoreError(err.0.clone())));
                }
            }
            Err(err) => {
                for reply in replies {
                    let _ = reply.send(Err(StoreError(err.0.clone())));
                }
            }
        }
    }
    driving.finished();
}

/// The variant's process-wide state: a lane per SKU.
pub(super) struct LuaBatch {
    max: usize,
    lanes: Lanes<Buyer, Arc<Call>>,
}

impl Default for LuaBatch {
    fn default() -> Self {
        Self::new(DEFAULT_BATCH_MAX)
    }
}

impl LuaBatch {
    /// Up to `max` buyers per call (at least 1).
    pub(super) fn new(max: usize) -> Self {
        Self {
            max: max.clamp(1, MAX_BATCH_MAX),
            lanes: Lanes::default(),
        }
    }
}

/// What every call of one SKU's lane sends besides its buyers' ids: the
/// SKU's keys and the script's first four arguments.
struct Call {
    keys: Keys,
    head: [String; 4],
}

impl Call {
    fn of(ctx: &Ctx<'_>) -> Self {
        Self {
            keys: ctx.keys.clone(),
            head: [
                ctx.instance.to_owned(),
                ledger::millis(ctx.request_ttl).to_string(),
                ctx.request_ids_per_sku.to_string(),
                ledger::millis(ledger::SOLD_OUT_KEEP).to_string(),
            ],
        }
    }

    /// One call of `deduct_batch.lua` for the buyers `ids`, written
    /// straight into one command (as `lua`'s sale is).
    async fn send(
        self: Arc<Self>,
        mut conn: Conn,
        ids: Vec<String>,
    ) -> Result<Vec<i64>, StoreError> {
        let keys = deduct_keys(&self.keys);
        Ok(
            crate::store::evalsha(&mut conn, &DEDUCT_BATCH, &keys, |cmd| {
                for arg in self.head.iter().chain(&ids) {
                    cmd.arg(arg);
                }
            })
            .await?,
        )
    }
}

impl Protection for LuaBatch {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        let (lane, call) = self.lanes.of(&ctx.keys.tag, || Arc::new(Call::of(ctx)));
        let (reply, answer) = oneshot::channel();
        let buyer = Buyer {
            request_id: ctx.request_id.unwrap_or("").to_owned(),
            reply,
        };
        if lane.push(buyer) {
            // Nothing in flight: this buyer's batch goes now, driven by a
            // task of its own (a buyer who hangs up must not strand the others).
            let conn = ctx.conn.clone();
            tokio::spawn(drive(lane, self.max, move |ids| {
                call.clone().send(conn.clone(), ids)
            }));
        }
        let deducted = match answer.await {
            Ok(Ok(numbers)) => deducted(ctx, ctx.keys, Orders::None, None, &numbers),
            Ok(Err(err)) => Err(err),
            // The driver died with this buyer's call in hand: it may have run.
            Err(_) => return Ok(Answer::recorded(Outcome::Unknown, false)),
        };
        answer_of(deducted)
    }
}
