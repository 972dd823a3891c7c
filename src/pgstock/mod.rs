//! The stock the database itself protects: what practitioners pick instead
//! of a Redis lock, "let the database do it".
//!
//! A SKU's stock is one row of `stock` (migration `0005_stock.sql`), its
//! sales rows of `stock_sales`, each request id's first answer a row of
//! `stock_requests`. Like Redis's ledger, a sale is written by the very
//! statement or transaction that moves the stock, and the books
//! ([`books`]) are read from the rows, never from what a protocol believes
//! it did: a unit sold twice shows as two sales of one unit.
//!
//! The protocols ([`sale`]) differ only in what surrounds the same read,
//! work and write: a conditional `UPDATE` that is the whole sale, a row
//! lock (`SELECT … FOR UPDATE`), a version compared at the write
//! (optimistic), or an advisory lock on the SKU; and, for the lesson's
//! contrast, nothing at all. [`batch`] decides a queue of buyers in one
//! transaction under the row's lock.

pub mod batch;
pub mod both;
mod ids;
pub mod sale;
mod statements;

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
pub use deadpool_postgres::Pool;
use tokio_postgres::GenericClient;

use crate::outcome::Outcome;

/// Who buys, and what the request asked of the section.
#[derive(Clone, Copy, Debug)]
pub struct Buyer<'a> {
    pub sku: &'a str,
    pub request_id: Option<&'a str>,
    /// The instance that sells, in the sale's row.
    pub instance: &'a str,
    /// The business work between the read and the write (`work_ms`).
    pub work: Duration,
    /// How long to wait for a lock (row or advisory): zero fails at once.
    pub wait: Duration,
    /// How long a database lock's transaction may sit silent holding its
    /// lock (`idle_in_transaction_session_timeout`): past it, PostgreSQL
    /// ends the session, which frees the lock and rolls the sale back.
    pub lease: Duration,
}

/// A protocol's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PgAnswer {
    pub outcome: Outcome,
    /// The request id's first answer, repeated: nothing sold now.
    pub replayed: bool,
    /// Writes refused because the version had moved (`optimistic`).
    pub conflicts: u32,
    /// From when the lock was seen granted to when COMMIT was about to be
    /// sent, on the timeline's clock ([`crate::timeline::now_ns`]): a span
    /// the locking protocols surely held it for (`None` without a lock,
    /// or when the commit's answer never came).
    pub held: Option<(u64, u64)>,
}

impl PgAnswer {
    pub(super) fn new(outcome: Outcome) -> Self {
        Self {
            outcome,
            replayed: false,
            conflicts: 0,
            held: None,
        }
    }
}

/// Nothing was committed: the database refused, or was not reached,
/// before a commit was sent.
#[derive(Debug, thiserror::Error)]
#[error("PostgreSQL: {0}")]
pub struct PgError(#[from] pub tokio_postgres::Error);

/// A SKU's books as the rows say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Books {
    /// Which stocking of the SKU: each reset starts the next.
    pub epoch: i64,
    pub initial: i64,
    /// The stock row's value now.
    pub remaining: i64,
    /// Sales of this epoch, counted from their rows.
    pub sold: i64,
    /// Units sold more than once (each extra sale of a unit counts once).
    pub duplicates: i64,
    /// Sales that no stock backs ([`crate::wire::oversold`]), as in
    /// Redis's ledger (a lost update leaves two sales and one unit gone).
    pub oversold: i64,
}

/// How many connections an instance's [`pool`] keeps at most: enough for
/// the sales in flight on one instance to hold a transaction each while
/// working, few enough for several instances on one server's default 100.
pub const POOL_SIZE: usize = 16;

/// How long a connection of a [`pool`] may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A pool of at most `size` connections to the database at `url`
/// (`postgresql://user@host:port/database`, no TLS), each opened when a
/// sale first needs it and again after it broke. Nothing is connected yet.
pub fn pool(url: &str, size: usize) -> anyhow::Result<Pool> {
    let mut config = tokio_postgres::Config::from_str(url)
        .with_context(|| format!("bad PostgreSQL URL {}", crate::orders::shown(url)))?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    let manager = deadpool_postgres::Manager::from_config(
        config,
        tokio_postgres::NoTls,
        deadpool_postgres::ManagerConfig {
            // A broken connection shows as closed: no round trip per use.
            recycling_method: deadpool_postgres::RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size)
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .build()
        .context("cannot build the PostgreSQL pool")
}

/// Stocks `sku` with `stock` units in a new epoch (the first is 1): the
/// earlier epochs' sales and request ids stay, the SKU counts from zero.
/// Returns the new epoch.
pub async fn reset(client: &impl GenericClient, sku: &str, stock: i64) -> Result<i64, PgError> {
    let row = client
        .query_one(
            "INSERT INTO stock (sku, epoch, initial, remaining) VALUES ($1, 1, $2, $2)
             ON CONFLICT (sku) DO UPDATE
                 SET epoch = stock.epoch + 1, initial = $2, remaining = $2, sold = 0,
                     version = stock.version + 1
             RETURNING epoch",
            &[&sku, &stock],
        )
        .await?;
    Ok(row.try_get(0)?)
}

/// Stocks `sku` with `stock` units unless it is stocked already (a
/// database that holds it keeps its state).
pub async fn seed(client: &impl GenericClient, sku: &str, stock: i64) -> Result<(), PgError> {
    client
        .execute(
            "INSERT INTO stock (sku, epoch, initial, remaining) VALUES ($1, 1, $2, $2)
             ON CONFLICT (sku) DO NOTHING",
            &[&sku, &stock],
        )
        .await?;
    Ok(())
}

/// `sku`'s books, or `None` if it was never stocked.
pub async fn books(client: &impl GenericClient, sku: &str) -> Result<Option<Books>, PgError> {
    let Some(row) = client
        .query_opt(
            "SELECT s.epoch, s.initial, s.remaining,
                    count(x.sale), count(x.sale) - count(DISTINCT x.unit)
             FROM stock s LEFT JOIN stock_sales x ON x.sku = s.sku AND x.epoch = s.epoch
             WHERE s.sku = $1
             GROUP BY s.epoch, s.initial, s.remaining",
            &[&sku],
        )
        .await?
    else {
        return Ok(None);
    };
    let (epoch, initial, remaining, sold, duplicates): (i64, i64, i64, i64, i64) = (
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
        row.try_get(4)?,
    );
    Ok(Some(Books {
        epoch,
        initial,
        remaining,
        sold,
        duplicates,
        oversold: crate::wire::oversold(sold, 0, initial, remaining),
    }))
}

/// `snapshot` (Redis's ledger of its SKU) with the stock and sales of
/// PostgreSQL's books, when the database sold from that SKU in its current
/// epoch: the `pg-*` variants' SKUs are read there. The answers' counts
/// (by instance, unknown ones) stay Redis's, where every instance counts
/// them. Returns whether it did.
pub async fn overlay(
    client: &impl GenericClient,
    snapshot: &mut crate::wire::StateSnapshot,
) -> Result<bool, PgError> {
    let Some(books) = books(client, &snapshot.sku).await? else {
        return Ok(false);
    };
    if books.sold == 0 {
        return Ok(false);
    }
    snapshot.initial = books.initial;
    snapshot.remaining = books.remaining;
    snapshot.sold = books.sold;
    snapshot.oversold = books.oversold;
    snapshot.duplicates = books.duplicates;
    Ok(true)
}
