//! `pg-optimistic`: read with the row's version, work, write only if the
//! version is still the one read.
//!
//! No lock is held while the business work runs: the write `UPDATE …
//! WHERE version = $read` finds no row if anyone wrote meanwhile, and the
//! buyer reads again and tries again, up to [`TRIES`] times; then it is
//! told `busy` (`version_conflict`) with stock left: safe, and on a hot
//! SKU many buyers are turned away while later ones sell the stock.

use super::family::DATABASE;
use super::pg_common::{answer, buyer, connection};
use super::{About, Claim, Claims, Protection, Reason};
use crate::pgstock::sale;
use crate::section::{Answer, Ctx};
use crate::store::StoreError;

pub(super) const ABOUT: About = About {
    name: "pg-optimistic",
    protection: "PostgreSQL optimistic lock: read the version, work, UPDATE ... WHERE version = the one read, retried",
    explanation: "The optimistic lock. Read the stock with the row's version, do the business work holding nothing, then \
        write what was read minus one with UPDATE ... WHERE version = the version read: if anyone wrote the row \
        meanwhile, the update finds no row, and the buyer reads again and tries again, up to 5 times, then gives up \
        (busy, version_conflict) with stock left. Nothing waits on anything and no buyer ever sells a unit someone \
        else sold; on a hot SKU many writes are refused, and many buyers are turned away while stock is left.",
    protection_zh: "PostgreSQL 乐观锁:读版本号,业务,`UPDATE ... WHERE version =` 读到的版本,失败重试",
    explanation_zh: "乐观锁。读取库存和这一行的版本号,业务期间什么也不持有,然后用 `UPDATE ... WHERE version =` 读到的版本 写回读到的值减一:如果其间有人写过这一行,更新匹配不到行,买家重新读取再试,最多 5 次,之后放弃(`busy`,`version_conflict`),库存还有剩余。没有任何等待,也没有买家会卖出别人卖过的那一件;热点 SKU 上很多写会被拒绝,库存还有剩余时很多买家会被拒之门外。",
    code: r#"
loop up to 5 times {
    SELECT remaining, version FROM stock WHERE sku = $1;
    -- the business work (work_ms), nothing held
    UPDATE stock SET remaining = $read - 1, sold = sold + 1, version = version + 1
        WHERE sku = $1 AND version = $version;   -- no row: someone wrote, try again
}"#,
    default_lease: None,
    default_wait: None,
    claims: Claims {
        slow_business: Claim::not_applicable("holds no lock while working"),
        ..DATABASE
    },
    undersells: Some(Reason {
        en: "gives up after 5 refused writes (busy, version_conflict): under contention a buyer is turned away while stock is left, which later buyers may still sell",
        zh: "写入连续 5 次被拒绝后放弃(`busy`,`version_conflict`):竞争激烈时买家被拒绝而库存还有剩余,后来的买家也许还能买走",
    }),
    facts: super::family::DATABASE_FACTS,
};

/// How many times a buyer reads and tries to write before it gives up.
pub(super) const TRIES: u32 = 5;

pub(super) struct PgOptimistic;

impl Protection for PgOptimistic {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        let c = connection(ctx).await?;
        let buyer = buyer(ctx, &ABOUT);
        answer(ctx, sale::optimistic(&**c, &buyer, &ctx.hook, TRIES).await)
    }
}
