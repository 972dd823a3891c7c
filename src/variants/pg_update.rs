//! `pg-update`: the database's own atomic decrement, `lua`'s counterpart.
//!
//! One conditional `UPDATE stock SET remaining = remaining - 1 WHERE
//! remaining > 0`, the sale's row and the request id's answer in the same
//! statement: PostgreSQL locks the row for the statement and re-checks the
//! condition on the newest version, so two buyers can never both take the
//! last unit. No section, no lock of ours, one round trip; the business
//! work cannot run inside it (`work_ms` is ignored). On one hot row the
//! statements queue on the row's lock: the price the bench measures.

use super::family::DATABASE;
use super::pg_common::{answer, buyer, connection};
use super::{About, Protection};
use crate::pgstock::sale;
use crate::section::{Answer, Ctx, Outcome};
use crate::store::StoreError;

pub(super) const ABOUT: About = About {
    name: "pg-update",
    protection: "no lock of ours: one conditional UPDATE decrements and records the sale in PostgreSQL",
    explanation: "The database's atomic decrement, the counterpart of lua. One statement, UPDATE stock SET remaining = \
        remaining - 1 WHERE sku = $1 AND remaining > 0, writes the sale's row and the request id's answer in the same \
        statement. PostgreSQL takes the row's lock for the statement and checks the condition again on the newest \
        version of the row, so two buyers never both take the last unit. One round trip and no lock of ours; the \
        business work cannot run inside it (work_ms is ignored). On one hot SKU every buyer queues on the same row \
        lock: the bench's pg-update-vs-lua row measures what that costs against Redis.",
    protection_zh: "不加我们自己的锁:一条条件 UPDATE 在 PostgreSQL 里扣减并记账",
    explanation_zh: "数据库自己的原子扣减,相当于 lua。一条带条件的 UPDATE 语句(只在库存大于零时减一),同一条语句里写入这次售出和请求 id 的答复。PostgreSQL 在语句执行期间锁住这一行,并在最新版本上重新检查条件,所以两个买家不可能同时拿走最后一件。一次往返,没有我们自己的锁;业务逻辑不能放在里面(work_ms 被忽略)。热点 SKU 上所有买家都在同一行锁上排队:`bench` 的 `pg-update-vs-lua` 一行量出它相对 Redis 的代价。",
    code: r#"
WITH s AS (UPDATE stock SET remaining = remaining - 1, sold = sold + 1
           WHERE sku = $1 AND remaining > 0
           RETURNING epoch, sold, remaining, remaining + 1 AS unit),
     sale AS (INSERT INTO stock_sales ... SELECT ... FROM s),
     answer AS (INSERT INTO stock_requests ... SELECT ... FROM s WHERE $2 IS NOT NULL)
SELECT unit, remaining FROM s"#,
    default_lease: None,
    default_wait: None,
    claims: DATABASE,
    undersells: None,
    facts: super::family::DATABASE_FACTS,
};

pub(super) struct PgUpdate;

impl Protection for PgUpdate {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        let c = connection(ctx).await?;
        let buyer = buyer(ctx, &ABOUT);
        let mut answered = answer(ctx, sale::update(&**c, &buyer, &ctx.hook).await)?;
        // The statement's moment, on the timeline: one step inside the
        // database, which overlaps nothing (taken as its answer arrived).
        if let Outcome::Sold { .. } | Outcome::SoldOut { .. } = answered.outcome
            && !answered.replayed
        {
            let at = crate::timeline::now_ns();
            let mut section = crate::section::ended_as(ctx, None, at, &answered.outcome);
            section.exit_ns = at;
            section.atomic = true;
            answered.witnessed = Some(Box::new(section));
        }
        Ok(answered)
    }
}
