//! The order message: what a sale puts on its SKU's stream (`orders:{sku}`)
//! for a worker to turn into an order row.
//!
//! `lua-stream` writes it inside its sale script (`XADD`, the same atomic
//! step as the decrement); `lua-then-queue` sends it afterwards with
//! [`enqueue`], a second command a crash can come before.

use std::collections::HashMap;

use redis::aio::ConnectionLike;

use crate::store::{Keys, StoreError};

/// The consumer group every instance's worker belongs to.
pub const GROUP: &str = "workers";

/// The set of SKUs whose sales became orders: the streams the workers read.
pub const REGISTRY: &str = "stocklock:orders:skus";

/// One sale on its way to becoming an order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderMessage {
    pub sku: String,
    /// The SKU's ledger epoch when it was sold (a reset starts a new one).
    pub epoch: i64,
    pub unit: i64,
    /// The sale's number in its epoch: the ledger's `sold` right after it.
    pub sale: i64,
    pub request_id: Option<String>,
    /// The instance that sold it.
    pub instance: String,
    /// When it was sold, Redis's clock, in milliseconds since the epoch.
    pub at_ms: i64,
    /// The buyer's proof of ownership ([`new_token`]): the sale's answer
    /// carried it, and paying or finding the order takes it. `None` in a
    /// message written before orders had tokens.
    pub token: Option<String>,
    /// The schedule its buyer belonged to (`RUN:BUYER`, chaos mode only):
    /// a worker stops at its gate between the order's commit and its ack.
    pub schedule: Option<String>,
}

/// A fresh order token: 244 random bits (two v4 UUIDs, from the operating
/// system's generator), 64 hex digits. Order ids are sequential; this is
/// what nobody else can guess.
pub fn new_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

impl OrderMessage {
    /// The stream entry's fields (the SKU is the stream's).
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        let mut fields = vec![
            ("unit", self.unit.to_string()),
            ("sale", self.sale.to_string()),
            ("epoch", self.epoch.to_string()),
            ("request_id", self.request_id.clone().unwrap_or_default()),
            ("instance", self.instance.clone()),
            ("at", self.at_ms.to_string()),
            ("token", self.token.clone().unwrap_or_default()),
        ];
        if let Some(schedule) = &self.schedule {
            fields.push(("schedule", schedule.clone()));
        }
        fields
    }

    /// Reads an entry of `sku`'s stream back; `None` for one that lacks a field.
    pub fn parse(sku: &str, fields: &HashMap<String, redis::Value>) -> Option<Self> {
        let text = |name: &str| -> Option<String> {
            redis::from_redis_value_ref::<String>(fields.get(name)?).ok()
        };
        let number = |name: &str| -> Option<i64> { text(name)?.parse().ok() };
        Some(Self {
            sku: sku.to_owned(),
            epoch: number("epoch")?,
            unit: number("unit")?,
            sale: number("sale")?,
            request_id: text("request_id").filter(|id| !id.is_empty()),
            instance: text("instance").unwrap_or_default(),
            at_ms: number("at")?,
            token: text("token").filter(|token| !token.is_empty()),
            schedule: text("schedule"),
        })
    }
}

/// Puts `message` on its SKU's stream, as `lua-then-queue` does after its
/// sale: a command of its own, and the SKU in the registry (the workers'
/// list of streams), in one round trip.
pub async fn enqueue<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    message: &OrderMessage,
) -> Result<(), StoreError> {
    let _: () = redis::pipe()
        .xadd(&keys.orders, "*", &message.fields())
        .ignore()
        .sadd(REGISTRY, &keys.tag)
        .ignore()
        .query_async(conn)
        .await?;
    Ok(())
}

/// Adds a SKU to the registry (after a `lua-stream` sale, whose script
/// cannot name a key of another slot).
pub async fn register<C: ConnectionLike>(conn: &mut C, sku: &str) -> Result<(), StoreError> {
    let _: i64 = redis::cmd("SADD")
        .arg(REGISTRY)
        .arg(sku)
        .query_async(conn)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_reads_back_as_it_was_written() {
        let message = OrderMessage {
            sku: "lua-stream".to_owned(),
            epoch: 3,
            unit: 17,
            sale: 34,
            request_id: Some("r-1".to_owned()),
            instance: "a".to_owned(),
            at_ms: 1_700_000_000_123,
            token: Some(new_token()),
            schedule: None,
        };
        let fields: HashMap<String, redis::Value> = message
            .fields()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), redis::Value::BulkString(v.into_bytes())))
            .collect();
        assert_eq!(
            OrderMessage::parse("lua-stream", &fields),
            Some(message.clone())
        );
        let scheduled = OrderMessage {
            schedule: Some("run-1:A".to_owned()),
            ..message
        };
        let with_schedule: HashMap<String, redis::Value> = scheduled
            .fields()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), redis::Value::BulkString(v.into_bytes())))
            .collect();
        assert_eq!(
            OrderMessage::parse("lua-stream", &with_schedule),
            Some(scheduled)
        );
        let mut without_sale = fields.clone();
        without_sale.remove("sale");
        assert_eq!(OrderMessage::parse("lua-stream", &without_sale), None);
    }
}
