//! The worker's insert: a batch of order messages as rows, in one
//! transaction. A message whose order exists (redelivered) inserts
//! nothing; one that meets another order's identity is refused
//! ([`is_conflict`]): the worker keeps it pending instead of acking it.

use std::time::Duration;

use tokio_postgres::types::ToSql;

use super::Client;
use super::message::OrderMessage;

/// Inserts one order; nothing when the order of the same sale exists (a
/// redelivered message). Answers (inserted, orders of this very message
/// found before): both 0 when the sale's order is another message's. Any
/// other unique constraint fails the statement.
const INSERT: &str = "WITH new AS (
    INSERT INTO orders
        (sku, epoch, unit, sale, request_id, instance, status, sold_at, created_at, pay_by, token)
    VALUES ($1, $2, $3, $4, $5, $6, 'pending_payment',
        to_timestamp($7::float8 / 1000), clock_timestamp(),
        clock_timestamp() + $8::float8 * interval '1 millisecond', $9)
    ON CONFLICT (sku, epoch, sale) DO NOTHING
    RETURNING 1)
SELECT (SELECT count(*) FROM new),
    (SELECT count(*) FROM orders WHERE sku = $1 AND epoch = $2 AND sale = $4
        AND unit = $3 AND request_id IS NOT DISTINCT FROM $5)";

/// An order refused because another order holds its sale.
#[derive(Debug)]
pub(super) struct SaleTaken {
    epoch: i64,
    sale: i64,
}

impl std::fmt::Display for SaleTaken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "sale {} of epoch {} is another message's order",
            self.sale, self.epoch
        )
    }
}

impl std::error::Error for SaleTaken {}

/// Whether an insert failed on another order's identity (its sale, its
/// live unit, its request id), not on the database being unreachable.
pub(super) fn is_conflict(err: &anyhow::Error) -> bool {
    err.downcast_ref::<SaleTaken>().is_some()
        || err
            .downcast_ref::<tokio_postgres::Error>()
            .and_then(tokio_postgres::Error::code)
            == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
}

/// A worker's connection to the orders' database, with its insert
/// prepared once.
pub(super) struct Orders {
    client: Client,
    insert: tokio_postgres::Statement,
}

impl Orders {
    pub(super) async fn prepare(client: Client) -> anyhow::Result<Self> {
        let insert = client.prepare(INSERT).await?;
        Ok(Self { client, insert })
    }

    /// Inserts `messages` as orders in one transaction (a message whose
    /// order exists inserts nothing); how many were new. The inserts are
    /// pipelined. A sale whose order is another message's is [`SaleTaken`].
    pub(super) async fn insert(
        &mut self,
        messages: &[OrderMessage],
        pay_within: Duration,
    ) -> anyhow::Result<u64> {
        let statement = &self.insert;
        let transaction = self.client.transaction().await?;
        let pay_ms = pay_within.as_millis() as f64;
        let at: Vec<f64> = messages.iter().map(|m| m.at_ms as f64).collect();
        let params: Vec<[&(dyn ToSql + Sync); 9]> = messages
            .iter()
            .zip(&at)
            .map(|(m, at)| -> [&(dyn ToSql + Sync); 9] {
                [
                    &m.sku,
                    &m.epoch,
                    &m.unit,
                    &m.sale,
                    &m.request_id,
                    &m.instance,
                    at,
                    &pay_ms,
                    &m.token,
                ]
            })
            .collect();
        let rows = futures_util::future::try_join_all(
            params.iter().map(|p| transaction.query_one(statement, p)),
        )
        .await?;
        let mut inserted = 0;
        for (row, message) in rows.iter().zip(messages) {
            let (new, same): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
            if new == 0 && same == 0 {
                return Err(SaleTaken {
                    epoch: message.epoch,
                    sale: message.sale,
                }
                .into());
            }
            inserted += new as u64;
        }
        transaction.commit().await?;
        Ok(inserted)
    }
}
