//! `pg-batch`: the buyers of a SKU queued at an instance decided in one
//! transaction, `lua-batch`'s counterpart in PostgreSQL.
//!
//! On one hot row every `pg-update` buyer is a transaction of its own:
//! each waits for the row's lock, and each commit waits for its own flush
//! of the write-ahead log. Here each instance keeps a queue per SKU (the
//! lanes `lua-batch` keeps) and a driver sends whoever queued while the
//! previous batch was in flight (up to `serve --batch-max`) as one
//! transaction: the row locked and read, the ids' answers looked up, the
//! batch decided in queue order exactly as `pg-update` answers one buyer
//! after the other, one statement writing the stock, the sales and the
//! ids' answers, one commit (see [`crate::pgstock::batch`]). No timer: a
//! lone buyer goes at once. What breaks it: the row's lock taken out
//! (the live mutant `no-row-lock`) lets two instances' batches read the
//! same stock (`race` oversells); the ids' record taken out sells a retry
//! again (`commit-answer-lost`). A buyer with a schedule (the gates) is a
//! batch of its own, stopped at its own gates.

use std::sync::Arc;

use tokio::sync::oneshot;

use super::family::DATABASE;
use super::lane::{Driving, Lane, Lanes};
use super::pg_common::{answer, buyer, connection, pool, unavailable};
use super::{About, Protection};
use crate::lock::Hook;
use crate::pgstock::{self, PgAnswer, Pool};
use crate::section::{Answer, Ctx, Outcome};
use crate::store::StoreError;

pub(super) const ABOUT: About = About {
    name: "pg-batch",
    protection: "the stock row's lock, taken once for all the buyers of a SKU queued at an instance (up to 64): one transaction decides them",
    explanation: "When the hot row is the cost. Under pg-update every buyer of one SKU is a transaction of its own: each \
        waits for the row's lock, and each commit waits for its own flush of the write-ahead log. Here each instance keeps \
        a queue per SKU and sends the buyers waiting in it together (up to 64, `serve --batch-max`): one transaction locks \
        and reads the stock row (SELECT ... FOR UPDATE), looks up their request_ids' answers, decides them in queue order \
        exactly as pg-update would answer them one after the other (a unit each while the stock lasts, then sold out, an \
        id answered before replayed), and writes it all in one statement: the row less the units taken, every sale's row \
        and every id's answer from arrays (unnest). One commit, one flush, one wait on the row for the whole batch. No \
        timer: a buyer who finds no batch in flight goes at once, alone. What breaks it: without the row's lock two \
        instances' batches read the same stock and sell the same units (race, with the mutant no-row-lock). A commit \
        whose answer never came leaves every buyer it decided in doubt (unknown); each request_id resolves on a retry.",
    protection_zh: "库存行的行锁,为实例上排队的同一 SKU 的所有买家只取一次(最多 64 个):一个事务决定所有人",
    explanation_zh: "当热点行本身就是成本时。pg-update 下同一 SKU 的每个买家各是一个事务:每个都要等这一行的锁,每次提交都要等自己那一次预写日志刷盘。这里每个实例为每个 SKU 维护一个队列,把其中等待的买家一起发出(最多 64 个,`serve --batch-max`):一个事务锁住并读取库存行(`SELECT ... FOR UPDATE`),查出它们的 request_id 已有的答复,按排队顺序决定每个买家,和 pg-update 一个接一个地答复完全一样(库存还有时每人一件,之后售罄,已答复过的 id 重放原答复),再用一条语句写下全部:库存行减去卖出的件数、每笔销售的行、每个 id 的答复,都从数组展开(`unnest`)。整批只有一次提交、一次刷盘、一次行锁等待。没有定时器:发现没有批次在途的买家会被立即单独发送。什么会破坏它:没有行锁时,两个实例的批次读到同样的库存,卖出同样的件(race,用变异 `no-row-lock`)。一次没有收到答复的提交,它决定的每个买家都处于不确定状态(`unknown`);各自的 request_id 重试时得到结果。",
    code: r#"
queue[sku].push(buyer)                         // this instance's buyers of the SKU
if nothing in flight for sku:                  // no timer: a lone buyer goes at once
    spawn: while let batch = queue[sku].take(64) {
        BEGIN;
        SELECT epoch, remaining FROM stock WHERE sku = $1 FOR UPDATE;
        SELECT ... FROM stock_requests WHERE request_id = ANY($ids);  -- answered before
        -- decided in queue order: replay | unit = remaining-- | sold out
        WITH s AS (UPDATE stock SET remaining = $read - $n, sold = sold + $n ...),
             sale AS (INSERT INTO stock_sales SELECT ... FROM unnest($units, $ids)),
             answer AS (INSERT INTO stock_requests SELECT ... FROM unnest(...))
        SELECT 1 FROM s;
        COMMIT;                                -- one flush for the batch
    }
await my answer"#,
    default_lease: None,
    default_wait: None,
    claims: DATABASE,
    undersells: None,
    facts: super::family::DATABASE_FACTS,
};

/// A buyer waiting in a lane: its request id, and where its answer goes.
struct Waiting {
    request_id: Option<String>,
    reply: oneshot::Sender<Result<PgAnswer, String>>,
}

/// The variant's process-wide state: a lane per SKU.
pub(super) struct PgBatch {
    max: usize,
    lanes: Lanes<Waiting, ()>,
}

impl PgBatch {
    /// Up to `max` buyers per transaction (at least 1).
    pub(super) fn new(max: usize) -> Self {
        Self {
            max: max.clamp(1, super::MAX_BATCH_MAX),
            lanes: Lanes::default(),
        }
    }
}

impl Default for PgBatch {
    fn default() -> Self {
        Self::new(super::DEFAULT_BATCH_MAX)
    }
}

/// Sells `lane`'s batches until nobody waits, each on a connection of
/// `pool`: whoever queued while the previous batch was in flight.
async fn drive(lane: Arc<Lane<Waiting>>, max: usize, pool: Pool, sku: String, instance: String) {
    let driving = Driving::of(lane.clone());
    while let Some(batch) = lane.next(max) {
        let ids: Vec<Option<&str>> = batch.iter().map(|b| b.request_id.as_deref()).collect();
        crate::metrics::batch_sent(ids.len());
        let sold = match pool.get().await {
            Ok(mut c) => pgstock::batch::sell(&mut c, &sku, &instance, &ids, &Hook::none())
                .await
                .map_err(|err| err.to_string()),
            Err(err) => Err(err.to_string()),
        };
        match sold {
            Ok(answers) if answers.len() == batch.len() => {
                for (waiting, answer) in batch.into_iter().zip(answers) {
                    // A buyer who hung up meanwhile: its sale stands all the same.
                    let _ = waiting.reply.send(Ok(answer));
                }
            }
            Ok(answers) => {
                let err = format!("{} answers for {} buyers", answers.len(), batch.len());
                for waiting in batch {
                    let _ = waiting.reply.send(Err(err.clone()));
                }
            }
            Err(err) => {
                for waiting in batch {
                    let _ = waiting.reply.send(Err(err.clone()));
                }
            }
        }
    }
    driving.finished();
}

impl Protection for PgBatch {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        let buyer = buyer(ctx, &ABOUT);
        if ctx.hook.is_set() {
            // A scheduled buyer: a batch of its own, held at its own gates.
            let mut c = connection(ctx).await?;
            let ids = [buyer.request_id];
            let sold = pgstock::batch::sell(&mut c, buyer.sku, buyer.instance, &ids, &ctx.hook);
            let first = sold.await.map(|answers| answers.into_iter().next());
            return match first {
                Ok(Some(one)) => answer(ctx, Ok(one)),
                Ok(None) => Err(unavailable(&"the batch gave no answer")),
                Err(err) => answer(ctx, Err(err)),
            };
        }
        let pool = pool(ctx)?.clone();
        let (lane, ()) = self.lanes.of(buyer.sku, || ());
        let (reply, answered) = oneshot::channel();
        let waiting = Waiting {
            request_id: buyer.request_id.map(str::to_owned),
            reply,
        };
        if lane.push(waiting) {
            // Nothing in flight: this buyer's batch goes now, driven by a
            // task of its own (a buyer who hangs up must not strand the others).
            let (sku, instance) = (buyer.sku.to_owned(), buyer.instance.to_owned());
            tokio::spawn(drive(lane, self.max, pool, sku, instance));
        }
        match answered.await {
            Ok(Ok(one)) => answer(ctx, Ok(one)),
            Ok(Err(err)) => Err(unavailable(&err)),
            // The driver died with this buyer's batch in hand: it may have committed.
            Err(_) => Ok(Answer::recorded(Outcome::Unknown, false)),
        }
    }
}
