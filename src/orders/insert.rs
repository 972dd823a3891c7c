//! The worker's insert: a batch of order messages as rows, in one
//! transaction. A message whose order exists (redelivered) inserts
//! nothing; one that meets another order's identity is refused
//! ([`is_conflict`]): the worker keeps it pending instead of acking it.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tokio_postgres::types::ToSql;

use super::Client;
use super::message::OrderMessage;

/// Inserts a batch of orders (of one SKU) in one statement: the messages
/// come as arrays, one element per message. A message whose sale's order
/// exists inserts nothing (a redelivered message, or the same message
/// twice in one batch). Answers the (epoch, sale) of each order inserted.
/// Any other unique constraint (the unit live in another order, the
/// request id used) fails the whole statement.
const INSERT: &str = "INSERT INTO orders
        (sku, epoch, unit, sale, request_id, instance, status, sold_at, created_at, pay_by, token)
    SELECT $1, epoch, unit, sale, request_id, instance, 'pending_payment',
        to_timestamp(at_ms / 1000), clock_timestamp(),
        clock_timestamp() + $8::float8 * interval '1 millisecond', token
    FROM unnest($2::int8[], $3::int8[], $4::int8[], $5::text[], $6::text[], $7::float8[],
            $9::text[])
        WITH ORDINALITY AS t(epoch, unit, sale, request_id, instance, at_ms, token, n)
    ORDER BY n
    ON CONFLICT (sku, epoch, sale) DO NOTHING
    RETURNING epoch, sale";

/// The orders that hold some sales of a SKU (epochs and sales as arrays,
/// pairwise): what a message that inserted nothing met.
const HOLDERS: &str = "SELECT epoch, sale, unit, request_id FROM orders
    WHERE sku = $1 AND (epoch, sale) IN (SELECT * FROM unnest($2::int8[], $3::int8[]))";

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
    holders: tokio_postgres::Statement,
}

impl Orders {
    pub(super) async fn prepare(client: Client) -> anyhow::Result<Self> {
        let insert = client.prepare(INSERT).await?;
        let holders = client.prepare(HOLDERS).await?;
        Ok(Self {
            client,
            insert,
            holders,
        })
    }

    /// Inserts `messages` (of one SKU) as orders in one transaction (a
    /// message whose order exists inserts nothing); how many were new. A
    /// sale whose order is another message's is [`SaleTaken`], and nothing
    /// is inserted.
    pub(super) async fn insert(
        &mut self,
        messages: &[OrderMessage],
        pay_within: Duration,
    ) -> anyhow::Result<u64> {
        let Some(first) = messages.first() else {
            return Ok(0);
        };
        if messages.iter().any(|m| m.sku != first.sku) {
            anyhow::bail!("a batch of orders of several SKUs");
        }
        let column = |f: fn(&OrderMessage) -> i64| -> Vec<i64> { messages.iter().map(f).collect() };
        let (epoch, unit, sale) = (column(|m| m.epoch), column(|m| m.unit), column(|m| m.sale));
        let request_id: Vec<Option<&str>> =
            messages.iter().map(|m| m.request_id.as_deref()).collect();
        let instance: Vec<&str> = messages.iter().map(|m| m.instance.as_str()).collect();
        let at: Vec<f64> = messages.iter().map(|m| m.at_ms as f64).collect();
        let token: Vec<Option<&str>> = messages.iter().map(|m| m.token.as_deref()).collect();
        let pay_ms = pay_within.as_millis() as f64;
        let transaction = self.client.transaction().await?;
        let params: [&(dyn ToSql + Sync); 9] = [
            &first.sku,
            &epoch,
            &unit,
            &sale,
            &request_id,
            &instance,
            &at,
            &pay_ms,
            &token,
        ];
        let new: HashSet<(i64, i64)> = transaction
            .query(&self.insert, &params)
            .await?
            .iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .collect::<Result<_, tokio_postgres::Error>>()?;
        // A message that inserted nothing met the order of its sale: its
        // own (a redelivery, or its twin earlier in this batch), or another
        // message's, which refuses the whole batch (it is rolled back).
        let met: Vec<&OrderMessage> = messages
            .iter()
            .filter(|m| !new.contains(&(m.epoch, m.sale)))
            .collect();
        if !met.is_empty() {
            let epochs: Vec<i64> = met.iter().map(|m| m.epoch).collect();
            let sales: Vec<i64> = met.iter().map(|m| m.sale).collect();
            let mut holders = HashMap::new();
            for row in transaction
                .query(&self.holders, &[&first.sku, &epochs, &sales])
                .await?
            {
                let (epoch, sale, unit, request_id): (i64, i64, i64, Option<String>) = (
                    row.try_get(0)?,
                    row.try_get(1)?,
                    row.try_get(2)?,
                    row.try_get(3)?,
                );
                holders.insert((epoch, sale), (unit, request_id));
            }
            for message in met {
                let own = (message.unit, message.request_id.clone());
                if holders.get(&(message.epoch, message.sale)) != Some(&own) {
                    return Err(SaleTaken {
                        epoch: message.epoch,
                        sale: message.sale,
                    }
                    .into());
                }
            }
        }
        transaction.commit().await?;
        Ok(new.len() as u64)
    }
}
