//! `pg-for-update`: the section under the stock row's lock.
//!
//! `SELECT … FOR UPDATE` reads the stock and locks its row until the
//! transaction ends; the business work runs with the row locked, then the
//! write of what was read minus one and the commit. Every other buyer of
//! the SKU waits on the row (up to `wait_ms`, `NOWAIT` when zero). The
//! pessimistic lock: a dead holder's session ends and its transaction is
//! rolled back, lock and all.

use std::time::Duration;

use super::family::transaction_lock;
use super::pg_common::{answer, buyer, connection, with_chaos};
use super::{About, Protection};
use crate::pgstock::sale;
use crate::section::{Answer, Ctx};
use crate::store::StoreError;

pub(super) const ABOUT: About = About {
    name: "pg-for-update",
    protection: "PostgreSQL row lock: SELECT ... FOR UPDATE, the work, the write, COMMIT",
    explanation: "The pessimistic lock of the database. SELECT remaining FROM stock WHERE sku = $1 FOR UPDATE reads the stock \
        and locks its row until the transaction ends; the business work runs with the row locked, then the write of \
        what was read minus one, the sale's row, and COMMIT. Every other buyer of the SKU waits on the row lock (up to \
        wait_ms; with wait_ms=0 it asks NOWAIT and is told busy at once). A holder that dies ends its session, and \
        PostgreSQL rolls its transaction back and frees the row. One the database stops hearing from (frozen, or cut \
        off by a partition: no FIN ever comes) is ended by the transaction's idle_in_transaction_session_timeout, set \
        to the lease (lease_ms, 30 s by default): the row is free within the lease, and the holder's late write is \
        refused with its session (lock_lost). While it works the holder sends SELECT 1 every third of the lease, so a \
        slow holder the database hears keeps its row. The price is that the work is done \
        holding the row: one buyer at a time per SKU.",
    protection_zh: "PostgreSQL 行锁:SELECT ... FOR UPDATE,业务,写回,COMMIT",
    explanation_zh: "数据库的悲观锁。`SELECT remaining FROM stock WHERE sku = $1 FOR UPDATE` 读取库存并锁住这一行直到事务结束;业务逻辑在持有行锁时执行,然后写回读到的值减一、记下这次售出,再 COMMIT。同一 SKU 的其他买家在行锁上等待(最多 wait_ms;wait_ms=0 时用 NOWAIT,立即得到 `busy`)。持有者死掉,它的会话随之结束,PostgreSQL 回滚它的事务并释放这一行。数据库听不到的持有者(被冻结,或被网络分区隔开:永远等不到 FIN)由事务的 idle_in_transaction_session_timeout 结束,它设为租期(lease_ms,默认 30 秒):这一行在租期内被释放,持有者迟到的写随会话一起被拒绝(lock_lost)。业务执行期间持有者每三分之一个租期发一次 SELECT 1,所以数据库听得到的慢持有者保住它的行。代价是业务在持锁期间执行:每个 SKU 同一时间只有一个买家。",
    code: r#"
BEGIN;
SET LOCAL idle_in_transaction_session_timeout = $lease_ms;     -- silent longer: ended
SELECT epoch, remaining FROM stock WHERE sku = $1 FOR UPDATE;  -- waits for the row
-- the business work (work_ms), the row still locked; SELECT 1 every lease/3
UPDATE stock SET remaining = $read - 1, sold = sold + 1 WHERE sku = $1 AND epoch = $epoch;
INSERT INTO stock_sales ...;
COMMIT;                                                       -- frees the row"#,
    default_lease: Some(super::DEFAULT_LEASE),
    default_wait: Some(Duration::from_secs(10)),
    claims: transaction_lock("the row stays locked through the work"),
    undersells: None,
    facts: super::family::DATABASE_FACTS,
};

pub(super) struct PgForUpdate;

impl Protection for PgForUpdate {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        let mut c = connection(ctx).await?;
        let buyer = buyer(ctx, &ABOUT);
        let hook = with_chaos(ctx);
        answer(ctx, sale::for_update(&mut c, &buyer, &hook).await)
    }
}
