//! `redis-then-pg`: the articles' pairing. Redis pre-decrements the stock
//! (the atomic script, as `lua`), and only the buyers it let through go on
//! to the database's section, whose optimistic update is the truth.
//!
//! Redis absorbs the flood: once the database has sold out, a buyer Redis
//! turns away costs it one short statement (two with a request id), never
//! its section. A request id
//! resolves to one answer, kept in the database: an id it answered is
//! answered from there before Redis is asked. The database decides the
//! sale (`pg-optimistic`'s protocol: read with the version, work, write
//! only if the version did not move), so the books that count are its
//! own; a buyer the database refuses (versions that kept moving, an error
//! before the commit, an id another attempt bought with) gives its Redis
//! unit back, once, and Redis's net sales stay equal to the database's:
//! `stocklock reconcile` compares the two books.
//!
//! What leaves Redis short of the database: a Redis answer lost after its
//! script ran (the buyer is told nothing was sold, true in the database),
//! an instance killed between the two stores, a give-back that could not
//! reach Redis, or a commit whose answer was lost and that did not commit.
//! Short, Redis would turn buyers away with stock left in the database, so
//! its "sold out" is never an answer by itself: the database answers the
//! buyer Redis turned away ([`crate::pgstock::both::turned_away`]), "sold
//! out" only when it has none left either (recorded for the request id:
//! the database's stock never grows back within a stocking, so every retry
//! is told the truth), and with stock left it sells to that buyer by the
//! same protocol, with no Redis unit. That sale is a lost unit's, and the
//! two books meet again; or the unit of a buyer still between the two
//! stores, who then finds none left, is told so, and keeps its Redis unit
//! taken, and the books meet again too. Redis ends a unit ahead of the
//! database only when a buyer gives back a unit that one Redis turned away
//! bought meanwhile (its versions kept moving, an error before its commit,
//! or its id was the other attempt's): the next buyer takes that unit, the
//! database tells it "sold out", and Redis keeps it taken. Neither way
//! sells what the database does not have: its write checks the row it
//! read.

use super::family::DATABASE;
use super::lua::{Deducted, Orders, run_deduct};
use super::pg_common::{answer, buyer, connection, unavailable};
use super::{About, Claim, Claims, Protection};
use crate::orders::OrderMessage;
use crate::pgstock::{both, sale};
use crate::section::{Answer, BusyReason, Ctx, Outcome, nothing_sent};
use crate::store::StoreError;

const REDIS_ONLY_FILTERS: &str = "Redis only filters: the truth is in PostgreSQL";

pub(super) const ABOUT: About = About {
    name: "redis-then-pg",
    protection: "Redis pre-decrements with the atomic script, then PostgreSQL's optimistic update is the truth; a refusal gives the unit back, and the database answers whom Redis turned away",
    explanation: "The articles' pairing. The atomic Lua script takes a unit in Redis first, so once the SKU is sold \
        out its buyers cost the database a quick look, never its section; each buyer Redis let through then buys in \
        PostgreSQL with the optimistic lock (read the version, work, UPDATE ... WHERE version = the one read), and \
        only the database's answer counts. A write refused because the version moved means another buyer sold, so \
        the buyer reads again and tries again (up to 100 times) rather than give up with stock left. A buyer the \
        database refuses gives its Redis unit back, so Redis's net sales follow the database's and stocklock \
        reconcile finds the two books agreeing. A Redis answer lost after its script ran, an instance killed between \
        the two stores, or a commit whose answer was lost and that did not commit, leaves Redis a unit short of the \
        database, so Redis's sold-out is never the answer by itself: the database answers the buyer Redis turned \
        away, sold out only when it has none left either (recorded for the request id), and with stock left it \
        sells to that buyer with the same optimistic write. No buyer is told sold out while the database holds \
        stock, and none is sold a unit the database does not have, since its write checks the row it read.",
    protection_zh: "Redis 用原子脚本预扣库存,PostgreSQL 的乐观锁更新是最终结果;数据库拒绝时把这件还给 Redis,被 Redis 拒绝的买家由数据库答复",
    explanation_zh: "文章里的组合。原子 Lua 脚本先在 Redis 里拿走一件,所以售罄之后的买家只让数据库查一下,到不了数据库的临界区;Redis 放行的每个买家再用乐观锁在 PostgreSQL 里购买(读版本号,业务,`UPDATE ... WHERE version =` 读到的版本),只有数据库的答复算数。版本变了而写入被拒绝,说明别的买家卖出了,所以买家重新读取再试(最多 100 次),而不是在还有库存时放弃。被数据库拒绝的买家把 Redis 里的那一件还回去,所以 Redis 的净销量跟随数据库,`stocklock reconcile` 看到两本账一致。脚本执行后丢失了 Redis 的答复、实例在两个存储之间被杀,或提交的答复丢失而其实没有提交,会让 Redis 比数据库少一件,所以 Redis 的售罄从不单独作为答复:被 Redis 拒绝的买家由数据库答复,数据库也一件不剩时才是售罄(并为请求 id 记下),还有库存时就用同样的乐观写把这件卖给这个买家。没有买家会在数据库还有库存时被告知售罄,也不会卖出数据库没有的一件,因为数据库的写会检查读到的那一行。",
    code: r#"
EVAL deduct.lua stock:{sku} ...        -- Redis: take a unit, or sold out
loop up to 100 times {                 -- PostgreSQL: the truth
    SELECT remaining, version FROM stock WHERE sku = $1;
    -- none left: sold out (recorded for the request id)
    -- the business work (work_ms)
    UPDATE stock SET remaining = $read - 1, version = version + 1
        WHERE sku = $1 AND version = $version;
}
-- refused: EVAL give_back.lua (the unit back to Redis, once per sale)
-- sold out in Redis: the database answers (the same loop, no unit)"#,
    default_lease: None,
    default_wait: None,
    claims: Claims {
        slow_business: Claim::not_applicable("holds no lock while working"),
        kill_instance: Claim::keeps_selling("the database answers whom Redis turned away"),
        lock_vanishes_early: Claim::NOT_APPLICABLE,
        lock_vanishes: Claim::NOT_APPLICABLE,
        redis_restart: Claim::not_applicable(REDIS_ONLY_FILTERS),
        redis_pause: Claim::not_applicable(REDIS_ONLY_FILTERS),
        failover: Claim::not_applicable(REDIS_ONLY_FILTERS),
        redis_data_loss: Claim::not_applicable(REDIS_ONLY_FILTERS),
        ..DATABASE
    },
    undersells: None,
    facts: super::family::DATABASE_FACTS,
};

/// How many times a buyer reads and writes before it gives up. More than
/// `pg-optimistic`'s 5: each refused write is another buyer's sale, and a
/// stocking has no more sales than units, so one that keeps trying sells
/// or finds none left; giving up at 5 on a hot SKU gave units back after
/// the last buyers were told sold out (the lab's race sold 36 of 50).
const TRIES: u32 = 100;

/// `redis-then-pg` keeps no process-wide state: the two stores keep it all.
#[derive(Default)]
pub(super) struct RedisThenPg;

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
            // Sold out in Redis, which may be short of the database (see
            // the module's comment): the database answers. Sold out only
            // if it has none left either, recorded for the id (an attempt
            // of the id still in its section finds the record, and keeps
            // its unit taken); with stock left, a sale by the same
            // protocol, with no Redis unit to keep or give back.
            Taken::Refused(outcome @ Outcome::SoldOut { .. })
                if crate::chaos::mutant::on(crate::chaos::mutant::Mutant::RedisSaysSoldOut) =>
            {
                return Ok(Answer::recorded(outcome, false));
            }
            Taken::Refused(Outcome::SoldOut { .. }) => {
                let decided = both::turned_away(&**c, &buyer(ctx, &ABOUT), &ctx.hook, TRIES).await;
                return answer(ctx, decided);
            }
            // Never stocked, or a reset met: nothing to record for the id.
            Taken::Refused(outcome) => return Ok(Answer::recorded(outcome, false)),
        };
        let decided = sale::optimistic(&**c, &buyer(ctx, &ABOUT), &ctx.hook, TRIES).await;
        let keep = match &decided {
            // Sold out in the database, told now or recorded for the id
            // before (recorded only once the database had none left, which
            // it never has again in this stocking): a buyer Redis turned
            // away bought the unit, or the books had drifted. Redis's stock
            // comes down to the database's rather than sell a unit it does
            // not have.
            Ok(a) if matches!(a.outcome, Outcome::SoldOut { .. }) => true,
            // Sold, or perhaps sold, by this attempt: the unit stays taken.
            Ok(a) if !a.replayed => matches!(a.outcome, Outcome::Sold { .. } | Outcome::Unknown),
            // The id's sale made by another attempt, versions that kept
            // moving, a SKU the database does not have, or an error before
            // the commit: nothing sold, the unit goes back.
            _ => false,
        };
        // The live mutant `no-give-back` (debug builds only) keeps it.
        if !keep && !crate::chaos::mutant::on(crate::chaos::mutant::Mutant::NoGiveBack) {
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
/// which `stocklock reconcile` shows until a buyer Redis turns away buys
/// that unit in the database.
async fn give_back(ctx: &mut Ctx<'_>, taken: &OrderMessage) {
    let keys = ctx.keys;
    let given =
        crate::orders::expiry::give_back(&mut ctx.conn, keys, taken.epoch, taken.sale, taken.unit)
            .await;
    if let Err(err) = given {
        tracing::warn!(%err, sku = %keys.tag, unit = taken.unit, "a unit the database refused could not be given back to Redis: Redis is one unit short");
    }
}
