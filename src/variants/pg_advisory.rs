//! `pg-advisory`: the section under an advisory lock on the SKU: the
//! database as a lock store, beside Redis, etcd and ZooKeeper.
//!
//! `pg_advisory_xact_lock(hash of the SKU)` in the transaction that reads,
//! works and writes: the lock is the transaction's, released by its commit,
//! or by the end of the session if its holder dies (rolled back with it).
//! `wait_ms=0` tries once (`pg_try_advisory_xact_lock`).

use std::time::Duration;

use super::family::transaction_lock;
use super::pg_common::{answer, buyer, connection, with_chaos};
use super::{About, Protection};
use crate::pgstock::sale;
use crate::section::{Answer, Ctx};
use crate::store::StoreError;

pub(super) const ABOUT: About = About {
    name: "pg-advisory",
    protection: "PostgreSQL advisory lock on the SKU, held by the transaction that reads, works and writes",
    explanation: "The database as a lock store. The transaction takes pg_advisory_xact_lock on a hash of the SKU, reads the \
        stock plainly, does the business work, writes what was read minus one and commits; the commit releases the \
        lock. It is PostgreSQL's own mutex, not a row: nothing of the stock is locked, only the name, as with a Redis \
        lock, but it belongs to the transaction, so a holder that dies releases it when its session ends, its write \
        rolled back with it: no token needed. A holder the database stops hearing from (frozen, cut off) is ended by \
        the transaction's idle_in_transaction_session_timeout, set to the lease (lease_ms, 30 s by default): the lock \
        is free within the lease and the late write refused with the session (lock_lost); while it works, the holder \
        sends SELECT 1 every third of the lease, so a slow holder keeps the lock. Waits up to wait_ms (lock_timeout); with wait_ms=0 \
        it tries once and is told busy.",
    protection_zh: "PostgreSQL 咨询锁(`pg_advisory_xact_lock`),由读取、业务、写回的那个事务持有",
    explanation_zh: "把数据库当作锁服务。事务对 SKU 的哈希取 pg_advisory_xact_lock,普通地读取库存,执行业务,写回读到的值减一并提交;提交时释放锁。这是 PostgreSQL 自己的互斥锁,锁的不是行,而是一个名字,和 Redis 锁一样;但它属于事务,持有者死掉时会话结束,锁随之释放,它的写入也一起回滚:不需要令牌。数据库听不到的持有者(被冻结、被隔开)由事务的 idle_in_transaction_session_timeout 结束,它设为租期(lease_ms,默认 30 秒):锁在租期内被释放,迟到的写随会话一起被拒绝(lock_lost);业务执行期间持有者每三分之一个租期发一次 SELECT 1,所以慢持有者保住锁。最多等待 wait_ms(lock_timeout);wait_ms=0 时只试一次,失败得到 `busy`。",
    code: r#"
BEGIN;
SET LOCAL idle_in_transaction_session_timeout = $lease_ms;    -- silent longer: ended
SELECT pg_advisory_xact_lock(hashtextextended($sku, 0));      -- waits for the name
SELECT epoch, remaining FROM stock WHERE sku = $1;             -- a plain read
-- the business work (work_ms); SELECT 1 every lease/3
UPDATE stock SET remaining = $read - 1, sold = sold + 1 WHERE sku = $1 AND epoch = $epoch;
INSERT INTO stock_sales ...;
COMMIT;                                                        -- releases the lock"#,
    default_lease: Some(super::DEFAULT_LEASE),
    default_wait: Some(Duration::from_secs(10)),
    claims: transaction_lock("the lock is the transaction's, heard while it works"),
    undersells: None,
    facts: super::family::DATABASE_FACTS,
};

pub(super) struct PgAdvisory;

impl Protection for PgAdvisory {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        let mut c = connection(ctx).await?;
        let buyer = buyer(ctx, &ABOUT);
        let hook = with_chaos(ctx);
        answer(ctx, sale::advisory(&mut c, &buyer, &hook).await)
    }
}
