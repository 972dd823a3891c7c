//! Orders in PostgreSQL: where a sale ends up.
//!
//! The pipeline: an order variant's sale puts a message on its SKU's
//! stream ([`message`]); every instance's [`worker`] turns messages into
//! order rows (its insert refuses any order that is not the message's
//! own) and acks them after the commit; reservations not paid in time
//! expire, committed, and give their unit back after ([`expiry`]);
//! [`reconcile`] compares the ledger with the rows, epoch by epoch
//! ([`Reconciliation`](crate::wire::Reconciliation), a shape of the wire:
//! what it found, `LEDGER_LOST` when Redis lost the history some orders
//! name). Here: the connection ([`connect`]),
//! the schema ([`migrate`], run by each instance at start) and what an
//! instance is told about it ([`OrdersConfig`]).
//!
//! Migrations are SQL files under `migrations/` (`NNNN_name.sql`), embedded
//! in the binary ([`MIGRATIONS`], in order). [`migrate`] applies the ones
//! not yet applied, in order, in one transaction, and records each in
//! `schema_migrations`; it first takes a transaction-scoped advisory lock,
//! so instances starting at once apply each file once: the others wait for
//! the lock and then find it recorded.

pub mod expiry;
mod insert;
pub mod message;
pub mod reconcile;
pub mod summary;
pub mod worker;

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
pub use tokio_postgres::Client;
use tokio_postgres::NoTls;

pub use message::{OrderMessage, enqueue, new_token, register};

/// What an instance with orders on knows of them.
#[derive(Clone, Debug)]
pub struct OrdersConfig {
    pub postgres_url: String,
    /// How long a reservation waits for its payment.
    pub pay_within: Duration,
    /// How long a message may sit with a consumer, unacked, before
    /// another worker claims it.
    pub claim_idle: Duration,
}

/// The order pipeline's two timings, as `up` hands them to its instances.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub pay_within: Duration,
    pub claim_idle: Duration,
}

impl Timing {
    /// The instance's flags that set them.
    pub fn to_args(self) -> [String; 2] {
        [
            format!("--pay-within={}ms", self.pay_within.as_millis()),
            format!("--claim-idle={}ms", self.claim_idle.as_millis()),
        ]
    }
}

/// A reservation's default time to pay (`--pay-within`).
pub const DEFAULT_PAY_WITHIN: Duration = Duration::from_secs(15 * 60);
/// The default idle time before a dead worker's messages are claimed.
pub const DEFAULT_CLAIM_IDLE: Duration = Duration::from_secs(5);

impl OrdersConfig {
    /// How often the expiry pass looks for overdue reservations: often
    /// enough for a short deadline (the lab's), at most every second.
    pub fn expiry_every(&self) -> Duration {
        (self.pay_within / 4).clamp(Duration::from_millis(50), Duration::from_secs(1))
    }
}

/// The database as an instance's handlers use it: one connection, opened
/// when first needed and again after it broke.
pub struct Database {
    pub config: OrdersConfig,
    client: tokio::sync::Mutex<Option<std::sync::Arc<Client>>>,
    /// What the public orders view answers from.
    pub recent: summary::RecentBooks,
}

impl Database {
    pub fn new(config: OrdersConfig) -> Self {
        Self {
            config,
            client: tokio::sync::Mutex::new(None),
            recent: summary::RecentBooks::default(),
        }
    }

    /// The connection, (re)opened if need be.
    pub async fn client(&self) -> anyhow::Result<std::sync::Arc<Client>> {
        let mut client = self.client.lock().await;
        if let Some(open) = client.as_ref().filter(|c| !c.is_closed()) {
            return Ok(open.clone());
        }
        let open = std::sync::Arc::new(connect(&self.config.postgres_url).await?);
        *client = Some(open.clone());
        Ok(open)
    }
}

/// One embedded migration: `migrations/{version:04}_{name}.sql`.
#[derive(Clone, Copy, Debug)]
pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

/// Every migration, in the order they are applied.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "orders",
        sql: include_str!("../../migrations/0001_orders.sql"),
    },
    Migration {
        version: 2,
        name: "pipeline",
        sql: include_str!("../../migrations/0002_pipeline.sql"),
    },
    Migration {
        version: 3,
        name: "expiry_commits_first",
        sql: include_str!("../../migrations/0003_expiry_commits_first.sql"),
    },
    Migration {
        version: 4,
        name: "order_tokens",
        sql: include_str!("../../migrations/0004_order_tokens.sql"),
    },
    Migration {
        version: 5,
        name: "stock",
        sql: include_str!("../../migrations/0005_stock.sql"),
    },
];

/// The advisory lock [`migrate`] holds for its transaction (`stockloc` in
/// ASCII): one migrating instance at a time.
const MIGRATION_LOCK: i64 = 0x7374_6f63_6b6c_6f63;

/// How long a connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Connects to the database at `url` (`postgresql://user@host:port/db`,
/// no TLS: loopback or a private network). The connection runs in a task
/// of its own until the client is dropped.
pub async fn connect(url: &str) -> anyhow::Result<Client> {
    let mut config = tokio_postgres::Config::from_str(url)
        .with_context(|| format!("bad PostgreSQL URL {}", shown(url)))?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    let (client, connection) = config
        .connect(NoTls)
        .await
        .with_context(|| format!("cannot connect to PostgreSQL at {}", shown(url)))?;
    tokio::spawn(async move {
        if let Err(err) = connection.await {
            tracing::warn!("PostgreSQL connection ended: {err}");
        }
    });
    Ok(client)
}

/// `url` (PostgreSQL's or Redis's) without its password, for messages.
pub fn shown(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((user, host)) => {
                let user = user.split(':').next().unwrap_or_default();
                format!("{scheme}://{user}@{host}")
            }
            None => url.to_owned(),
        },
        None => "the URL given".to_owned(),
    }
}

/// Applies the migrations the database lacks, in order, in one
/// transaction, recording each in `schema_migrations`; returns the versions
/// it applied (none when the schema was already current).
pub async fn migrate(client: &mut Client) -> anyhow::Result<Vec<i64>> {
    let transaction = client.transaction().await?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .context("cannot take the migrations' lock")?;
    // Not the notice that schema_migrations exists, every start but the first.
    transaction
        .batch_execute("SET LOCAL client_min_messages = warning")
        .await?;
    transaction
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                 version bigint PRIMARY KEY,
                 name text NOT NULL,
                 applied_at timestamptz NOT NULL DEFAULT now()
             )",
        )
        .await?;
    let applied = transaction
        .query("SELECT version FROM schema_migrations", &[])
        .await?
        .iter()
        .map(|row| row.try_get(0))
        .collect::<Result<Vec<i64>, _>>()
        .context("schema_migrations is another tool's table")?;
    let mut now_applied = Vec::new();
    for migration in MIGRATIONS {
        if applied.contains(&migration.version) {
            continue;
        }
        transaction
            .batch_execute(migration.sql)
            .await
            .with_context(|| {
                format!(
                    "migration {:04}_{} failed",
                    migration.version, migration.name
                )
            })?;
        transaction
            .execute(
                "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                &[&migration.version, &migration.name],
            )
            .await?;
        now_applied.push(migration.version);
    }
    transaction.commit().await?;
    Ok(now_applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_in_order() {
        for (index, migration) in MIGRATIONS.iter().enumerate() {
            assert_eq!(migration.version, index as i64 + 1);
        }
    }

    #[test]
    fn a_password_is_not_shown() {
        assert_eq!(
            shown("postgresql://me:secret@db:5432/x"),
            "postgresql://me@db:5432/x"
        );
        assert_eq!(shown("postgresql://db/x"), "postgresql://db/x");
    }
}
