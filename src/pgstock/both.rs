//! A SKU whose stock both stores keep (`redis-then-pg`: Redis takes a
//! unit first, the database decides the sale, a refusal gives the unit
//! back): the buyer Redis turned away, whom the database answers
//! ([`turned_away`]); Redis's books beside the database's, and whether
//! they agree.

use serde::Serialize;
use tokio_postgres::GenericClient;

use super::ids::replayed;
use super::{Books, Buyer, PgAnswer, PgError, books, sale};
use crate::lock::Hook;
use crate::outcome::Outcome;
use crate::store::{Conn, Keys, StoreError};

/// A buyer Redis turned away (sold out there). Redis may be short of the
/// database (a unit taken in Redis that never reached it: an answer lost
/// after the script ran, an instance killed between the two), so the
/// database answers: one statement reads the stock and, when none is left
/// there either, records the request id's sold-out (true of the stock as
/// it is recorded; an id another attempt answered first is told that
/// answer). With stock left, the buyer buys by [`sale::optimistic`]'s
/// protocol, `tries` times at most, with no Redis unit: no buyer is told
/// "sold out" while the database holds stock.
pub async fn turned_away(
    c: &impl GenericClient,
    buyer: &Buyer<'_>,
    hook: &Hook,
    tries: u32,
) -> Result<PgAnswer, PgError> {
    let Some(row) = c
        .query_opt(
            "WITH s AS (SELECT epoch, remaining FROM stock WHERE sku = $1),
                  told AS (
                      INSERT INTO stock_requests (sku, epoch, request_id, outcome, remaining)
                      SELECT $1, epoch, $2::text, 'sold_out', remaining FROM s
                      WHERE remaining <= 0 AND $2::text IS NOT NULL
                      ON CONFLICT DO NOTHING RETURNING 1
                  )
             SELECT s.remaining, EXISTS (SELECT 1 FROM told) FROM s",
            &[&buyer.sku, &buyer.request_id],
        )
        .await?
    else {
        return Ok(PgAnswer::new(Outcome::NotStocked));
    };
    let (remaining, recorded): (i64, bool) = (row.try_get(0)?, row.try_get(1)?);
    if remaining > 0 {
        return sale::optimistic(c, buyer, hook, tries).await;
    }
    if buyer.request_id.is_some() && !recorded {
        return replayed(c, buyer).await;
    }
    Ok(PgAnswer::new(Outcome::SoldOut { remaining }))
}

/// The two books of one SKU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BothBooks {
    pub sku: String,
    /// Redis's stock now, its sales, and the units given back to it.
    pub redis_remaining: i64,
    pub redis_sold: i64,
    pub redis_returned: i64,
    /// The database's stock now and its sales (the truth).
    pub pg_remaining: i64,
    pub pg_sold: i64,
    /// The database's sales that no stock backs (0 unless it oversold).
    pub pg_oversold: i64,
    /// The same stock, and Redis's net sales (sold − returned) equal to
    /// the database's sales.
    pub agree: bool,
}

impl BothBooks {
    fn of(sku: &str, redis: &crate::wire::StateSnapshot, pg: &Books) -> Self {
        let agree = redis.initial == pg.initial
            && redis.remaining == pg.remaining
            && redis.sold - redis.returned == pg.sold
            && pg.oversold == 0
            && pg.duplicates == 0;
        Self {
            sku: sku.to_owned(),
            redis_remaining: redis.remaining,
            redis_sold: redis.sold,
            redis_returned: redis.returned,
            pg_remaining: pg.remaining,
            pg_sold: pg.sold,
            pg_oversold: pg.oversold,
            agree,
        }
    }

    /// What a reader sees: `agree`, or how Redis is apart from the database.
    pub fn verdict(&self) -> String {
        self.verdict_said().en
    }

    /// [`BothBooks::verdict`] in both languages.
    pub fn verdict_said(&self) -> crate::wire::Said {
        if self.agree {
            return crate::said!("agree", "一致");
        }
        let short = self.pg_remaining - self.redis_remaining;
        match short {
            n if n > 0 => crate::said!(
                "Redis is {n} unit(s) short of the database (under-sold)",
                "Redis 比数据库少 {n} 件(少卖)"
            ),
            n if n < 0 => {
                let n = -n;
                crate::said!(
                    "Redis has {n} unit(s) the database does not",
                    "Redis 多出 {n} 件数据库没有的库存"
                )
            }
            _ => crate::said!("the sales differ", "两边的销售不一致"),
        }
    }
}

/// Failure reading either store.
#[derive(Debug, thiserror::Error)]
pub enum BothError {
    #[error(transparent)]
    Redis(#[from] StoreError),
    #[error(transparent)]
    Postgres(#[from] PgError),
}

/// `sku`'s two books, or `None` when the database never stocked it.
pub async fn both(
    conn: &mut Conn,
    client: &impl GenericClient,
    sku: &crate::knobs::Sku,
) -> Result<Option<BothBooks>, BothError> {
    let Some(pg) = books(client, sku.as_str()).await? else {
        return Ok(None);
    };
    let redis = crate::ledger::snapshot(conn, &Keys::new(sku), sku.as_str()).await?;
    Ok(Some(BothBooks::of(sku.as_str(), &redis, &pg)))
}

/// The SKUs whose stock both stores keep: stocked in the database and
/// sold from in both (the `pg-*` variants' SKUs sell in the database
/// only, the Redis variants' in Redis only).
pub async fn both_skus(
    conn: &mut Conn,
    client: &impl GenericClient,
) -> Result<Vec<crate::knobs::Sku>, BothError> {
    let rows = client
        .query(
            "SELECT sku FROM stock s WHERE EXISTS
                 (SELECT 1 FROM stock_sales x WHERE x.sku = s.sku AND x.epoch = s.epoch)
             ORDER BY sku",
            &[],
        )
        .await
        .map_err(PgError)?;
    let mut skus = Vec::new();
    for row in rows {
        let name: String = row.try_get(0).map_err(PgError)?;
        let Ok(sku) = crate::knobs::Sku::parse(&name) else {
            continue;
        };
        let redis = crate::ledger::snapshot(conn, &Keys::new(&sku), sku.as_str()).await?;
        if redis.sold > 0 {
            skus.push(sku);
        }
    }
    Ok(skus)
}
