//! `redis-then-pg`: the articles' pairing. Redis pre-decrements the stock
//! (the atomic script, as `lua`), and only the buyers it let through go on
//! to the database, whose optimistic update is the truth.
//!
//! Redis absorbs the flood: a sold-out SKU's buyers never reach
//! PostgreSQL. The database decides the sale (`pg-optimistic`'s protocol:
//! read with the version, work, write only if the version did not move),
//! so the books that count are its own; a buyer the database refuses
//! (versions that kept moving, an error before the commit, an id it had
//! answered already) gives its Redis unit back, once, and Redis's net
//! sales stay equal to the database's: `stocklock reconcile` compares the
//! two books. What can leave them apart: a Redis answer lost after its
//! script ran (the buyer is told nothing was sold, true in the database,
//! and Redis is one unit short), a give-back that could not reach Redis,
//! or a commit whose answer was lost and that did not commit. Each only
//! ever leaves Redis short of the database, never the other way: the
//! database's condition stops every oversell. Short, Redis would turn the
//! last buyers away with stock left in the database (under-selling), so
//! an instance Redis told "sold out" looks at the two books now and then
//! and, once the database has sold nothing for a second, brings Redis's
//! stock up to the database's.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use redis::Script;

use super::lua::{Deducted, Orders, run_deduct};
use super::pg_common::{
    ANSWERED_ON_RETRY, SURVIVES_A_CRASH, answer, buyer, connection, unavailable,
};
use super::{About, Claim, Claims, Protection};
use crate::orders::OrderMessage;
use crate::pgstock::sale;
use crate::section::{Answer, BusyReason, Ctx, Outcome, nothing_sent};
use crate::store::StoreError;

const REDIS_ONLY_FILTERS: &str = "Redis only filters: the truth is in PostgreSQL";

pub(super) const ABOUT: About = About {
    protection: "Redis pre-decrements with the atomic script, then PostgreSQL's optimistic update is the truth; a refusal gives the unit back",
    explanation: "The articles' pairing. The atomic Lua script takes a unit in Redis first, so a sold-out SKU's buyers \
        never reach the database; each buyer Redis let through then buys in PostgreSQL with the optimistic lock (read \
        the version, work, UPDATE ... WHERE version = the one read), and only the database's answer counts. A write \
        refused because the version moved means another buyer sold, and Redis let through no more buyers than the \
        database has units, so the buyer reads again and tries again (up to 100 times) rather than give up with \
        stock left. A buyer the database refuses gives its Redis unit back, so Redis's net sales follow the database's and \
        stocklock reconcile finds the two books agreeing. A Redis answer lost after its script ran, an instance killed between the two stores, or a commit whose \
        answer was lost and that did not commit, leaves Redis a unit short of the database, never an oversell, since \
        the database's write checks the row it read; an instance that Redis told sold out compares the two books now \
        and then, and once the database has sold nothing for a second, Redis's stock catches up with it.",
    protection_zh: "Redis 用原子脚本预扣库存,PostgreSQL 的乐观锁更新是最终结果;数据库拒绝时把这件还给 Redis",
    explanation_zh: "文章里的组合。原子 Lua 脚本先在 Redis 里拿走一件,所以售罄之后的买家根本到不了数据库;Redis 放行的每个买家再用乐观锁在 PostgreSQL 里购买(读版本号,业务,UPDATE ... WHERE version = 读到的版本),只有数据库的答复算数。版本变了而写入被拒绝,说明别的买家卖出了,而 Redis 放行的买家不会多于数据库里的库存,所以买家重新读取再试(最多 100 次),而不是在还有库存时放弃。被数据库拒绝的买家把 Redis 里的那一件还回去,所以 Redis 的净销量跟随数据库,stocklock reconcile 看到两本账一致。脚本执行后丢失了 Redis 的答复、实例在两个存储之间被杀,或提交的答复丢失而其实没有提交,会让 Redis 比数据库少一件,但绝不会超卖,因为数据库的写会检查读到的那一行;被 Redis 告知售罄的实例会不时比较两本账,数据库一秒内没有新的售出时,把 Redis 的库存补齐到数据库的数。",
    code: r#"
EVAL deduct.lua stock:{sku} ...        -- Redis: take a unit, or sold out
loop up to 100 times {                 -- PostgreSQL: the truth
    SELECT remaining, version FROM stock WHERE sku = $1;
    -- the business work (work_ms)
    UPDATE stock SET remaining = $read - 1, version = version + 1
        WHERE sku = $1 AND version = $version;
}
-- refused: EVAL give_back.lua (the unit back to Redis, once per sale)"#,
    default_lease: None,
    default_wait: None,
    claims: Claims {
        one_instance: Claim::not_applicable("adds nothing to the race"),
        race: Claim::safe(""),
        slow_business: Claim::not_applicable("holds no lock while working"),
        crash_after_acquire: Claim::NOT_APPLICABLE,
        pause_holder: Claim::NOT_APPLICABLE,
        kill_instance: Claim::NOT_APPLICABLE,
        lock_vanishes_early: Claim::NOT_APPLICABLE,
        lock_vanishes: Claim::NOT_APPLICABLE,
        retry_storm: Claim::safe("one sale per request_id"),
        clock_skew: Claim::not_applicable("no lease"),
        redis_restart: Claim::not_applicable(REDIS_ONLY_FILTERS),
        redis_pause: Claim::not_applicable(REDIS_ONLY_FILTERS),
        redlock_minority_down: Claim::NOT_APPLICABLE,
        redlock_majority_down: Claim::NOT_APPLICABLE,
        redlock_restart_without_persistence: Claim::NOT_APPLICABLE,
        failover: Claim::not_applicable(REDIS_ONLY_FILTERS),
        failover_wait_early: Claim::NOT_APPLICABLE,
        failover_wait: Claim::NOT_APPLICABLE,
        crash_before_enqueue: Claim::NOT_APPLICABLE,
        worker_crash_before_ack: Claim::NOT_APPLICABLE,
        postgres_restart: Claim::safe(SURVIVES_A_CRASH),
        commit_answer_lost: Claim::safe(ANSWERED_ON_RETRY),
        reservation_expiry: Claim::NOT_APPLICABLE,
        redis_data_loss: Claim::not_applicable(REDIS_ONLY_FILTERS),
    },
    undersells: None,
};

/// How many times a buyer Redis let through reads and writes before it
/// gives up. More than `pg-optimistic`'s 5: each refused write is another
/// buyer's sale, and Redis lets no more buyers through than the database
/// has units, so one that keeps trying sells; giving up at 5 on a hot SKU
/// gave units back after the last buyers were told sold out (the lab's
/// race sold 36 of 50).
const TRIES: u32 = 100;

/// How often an instance looks at a sold-out SKU's two books, at most.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// How long the database must have sold nothing before Redis's stock is
/// made to catch up with it: buyers in flight between the two stores have
/// had their units taken in Redis and not yet committed.
const QUIET: &str = "1 second";

static TOP_UP: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/top_up.lua")));

/// `redis-then-pg`'s process-wide state: when this instance last looked
/// at each sold-out SKU's books (a bounded map, cleared when full).
#[derive(Default)]
pub(super) struct RedisThenPg {
    looked: Mutex<HashMap<String, Instant>>,
}

impl RedisThenPg {
    /// Whether this instance may look at `sku`'s books now (and notes it).
    fn due(&self, sku: &str) -> bool {
        let mut looked = self.looked.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if looked
            .get(sku)
            .is_some_and(|at| now.duration_since(*at) < LOOK_EVERY)
        {
            return false;
        }
        if looked.len() >= 1024 {
            looked.clear();
        }
        looked.insert(sku.to_owned(), now);
        true
    }
}

impl Protection for RedisThenPg {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        let c = connection(ctx).await?;
        // An id the database answered before is answered from there, and
        // Redis is not asked: its sold-out must not hide a sale made.
        let earlier = sale::answered(&**c, &buyer(ctx, &ABOUT)).await;
        if let Some(earlier) = earlier.map_err(|err| unavailable(&err))? {
            return answer(ctx, Ok(earlier));
        }
        let taken = match take_in_redis(ctx).await? {
            Taken::Unit(taken) => taken,
            // Sold out (or never stocked) in Redis: the database is spared,
            // but for a look now and then at whether Redis lost units.
            Taken::Refused(outcome) => {
                if matches!(outcome, Outcome::SoldOut { .. }) && self.due(ctx.keys.tag.as_str()) {
                    catch_up(ctx, &c).await;
                }
                return Ok(Answer::recorded(outcome, false));
            }
        };
        let decided = sale::optimistic(&**c, &buyer(ctx, &ABOUT), &ctx.hook, TRIES).await;
        let keep = match &decided {
            // Sold, or perhaps sold: the unit stays taken. Sold out in the
            // database (the books had drifted): Redis's stock comes down
            // to the database's rather than sell a unit it does not have.
            Ok(a) if !a.replayed => matches!(
                a.outcome,
                Outcome::Sold { .. } | Outcome::Unknown | Outcome::SoldOut { .. }
            ),
            // An id answered by another attempt, versions that kept
            // moving, a SKU the database does not have, or an error before
            // the commit: nothing sold, the unit goes back.
            _ => false,
        };
        if !keep {
            give_back(ctx, &taken).await;
        }
        answer(ctx, decided)
    }
}

/// What Redis's pre-decrement said.
enum Taken {
    /// A unit taken, with the sale's place in Redis's ledger.
    Unit(OrderMessage),
    /// None to take: sold out, or never stocked.
    Refused(Outcome),
}

/// Takes a unit in Redis with the atomic script, without the request id:
/// the database keeps the ids. A script sent and not answered may have
/// taken one; the database sold nothing, so the buyer is told so (503),
/// and Redis may be left one unit short.
async fn take_in_redis(ctx: &mut Ctx<'_>) -> Result<Taken, StoreError> {
    let request_id = ctx.request_id.take();
    let keys = ctx.keys;
    let ran = run_deduct(ctx, keys, true, None, Orders::Caller).await;
    ctx.request_id = request_id;
    match ran {
        Ok(Deducted::Order(_, taken)) => Ok(Taken::Unit(taken)),
        Ok(Deducted::Answer(answer)) => Ok(Taken::Refused(answer.outcome)),
        // Only a sharded caller's bucket count can be stale: a reset met.
        Ok(Deducted::StaleBuckets(_)) => Ok(Taken::Refused(Outcome::Busy(BusyReason::Reset))),
        Err(err) => {
            if !nothing_sent(&err) {
                tracing::warn!(%err, sku = %ctx.keys.tag, "the pre-decrement was sent and not answered: Redis may be one unit short of the database");
            }
            Err(err)
        }
    }
}

/// Gives `taken` back to Redis's stock (once per sale: `give_back.lua`).
/// If Redis cannot take it, Redis stays one unit short of the database,
/// which `stocklock reconcile` shows.
async fn give_back(ctx: &mut Ctx<'_>, taken: &OrderMessage) {
    let keys = ctx.keys;
    let given =
        crate::orders::expiry::give_back(&mut ctx.conn, keys, taken.epoch, taken.sale, taken.unit)
            .await;
    if let Err(err) = given {
        tracing::warn!(%err, sku = %keys.tag, unit = taken.unit, "a unit the database refused could not be given back to Redis: Redis is one unit short");
    }
}

/// Redis said sold out: if the database, quiet for [`QUIET`], has more
/// left than Redis, Redis lost units on the way (see the module's
/// comment) and its stock catches up with the database's (`top_up.lua`,
/// refused if anything moved since the read). A buyer still in flight
/// that commits later only leaves Redis a unit the database does not
/// have, which the next buyer takes and the database refuses: never an
/// oversell, the database decides.
async fn catch_up(ctx: &mut Ctx<'_>, c: &tokio_postgres::Client) {
    let keys = ctx.keys;
    let caught = async {
        let (epoch, stock): (Option<String>, Option<i64>) = redis::pipe()
            .hget(&keys.ledger, "epoch")
            .get(&keys.stock)
            .query_async(&mut ctx.conn)
            .await
            .map_err(|err| err.to_string())?;
        let (Some(epoch), Some(stock)) = (epoch, stock) else {
            return Ok(0);
        };
        let row = c
            .query_opt(
                &format!(
                    "SELECT s.remaining,
                            coalesce(max(x.at) < clock_timestamp() - interval '{QUIET}', true)
                     FROM stock s LEFT JOIN stock_sales x ON x.sku = s.sku AND x.epoch = s.epoch
                     WHERE s.sku = $1 GROUP BY s.remaining"
                ),
                &[&keys.tag.as_str()],
            )
            .await
            .map_err(|err| err.to_string())?;
        let Some(row) = row else { return Ok(0) };
        let (remaining, quiet): (i64, bool) = (
            row.try_get(0).map_err(|err| err.to_string())?,
            row.try_get(1).map_err(|err| err.to_string())?,
        );
        if !quiet || remaining <= stock {
            return Ok(0);
        }
        TOP_UP
            .key(&keys.stock)
            .key(&keys.ledger)
            .key(&keys.units)
            .key(&keys.returned_units)
            .arg(epoch)
            .arg(stock)
            .arg(remaining)
            .invoke_async::<i64>(&mut ctx.conn)
            .await
            .map_err(|err| err.to_string())
    };
    match caught.await {
        Ok(0) => {}
        Ok(units) => {
            tracing::warn!(sku = %keys.tag, units, "Redis was short of the database: its stock caught up")
        }
        Err(err) => {
            tracing::warn!(%err, sku = %keys.tag, "could not compare Redis's stock with the database's")
        }
    }
}
