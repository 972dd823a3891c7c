//! The Redis handle and the key layout of one SKU.
//!
//! Every key of a SKU carries the hash tag `{sku}`, so all of them live in one
//! Redis Cluster slot and every multi-key script stays valid on a cluster.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, IntoConnectionInfo, ProtocolVersion};
use tokio::sync::OnceCell;

use crate::knobs::Sku;

/// Redis did not answer, or answered with an error. Always a 503 to clients:
/// the request did not reach a decision.
#[derive(Debug, thiserror::Error)]
#[error("redis: {0}")]
pub struct StoreError(#[from] pub redis::RedisError);

/// The keys of one SKU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys {
    /// `stock:{sku}`: the remaining stock, the value the critical section reads and writes.
    pub stock: String,
    /// `ledger:{sku}`: hash of `initial`, `sold`, `duplicates`, `busy`, `lost_locks`.
    pub ledger: String,
    /// `units:{sku}`: hash of unit number → times sold.
    pub units: String,
    /// `served:{sku}`: hash of instance → requests answered.
    pub served: String,
    /// `lock:{sku}`: the lock every lock variant takes.
    pub lock: String,
    /// `requests:{sku}`: hash of request_id → outcome, for idempotent retries.
    pub requests: String,
    /// `fence:{sku}`: the fencing token counter (INCR at every acquisition; never reset).
    pub fence: String,
    /// `sections:{sku}`: the overlap witness's list of critical sections (chaos mode).
    pub sections: String,
}

impl Keys {
    pub fn new(sku: &Sku) -> Self {
        let tag = format!("{{{sku}}}");
        Self {
            stock: format!("stock:{tag}"),
            ledger: format!("ledger:{tag}"),
            units: format!("units:{tag}"),
            served: format!("served:{tag}"),
            lock: format!("lock:{tag}"),
            requests: format!("requests:{tag}"),
            fence: format!("fence:{tag}"),
            sections: format!("sections:{tag}"),
        }
    }
}

/// A cheap-to-clone handle on one Redis server.
///
/// The connection is made on first use, not at start-up, so an instance
/// started before its Redis answers 503 until Redis is there instead of
/// refusing to start. Once made, the [`ConnectionManager`] reconnects by
/// itself; a request during an outage fails fast rather than queueing.
#[derive(Clone)]
pub struct Store {
    client: Client,
    conn: Arc<OnceCell<ConnectionManager>>,
}

impl Store {
    /// Opens a handle on `url` (`redis://host:port/db`). Nothing is connected yet.
    /// RESP3 is used so that the same client can carry pub/sub pushes.
    pub fn open(url: &str) -> Result<Self, StoreError> {
        Ok(Self {
            client: resp3_client(url)?,
            conn: Arc::new(OnceCell::new()),
        })
    }

    /// The client, for connections of another kind (the pub/sub listener).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// A multiplexed connection: cloning it is cheap and all clones pipeline
    /// their commands over one socket.
    pub async fn conn(&self) -> Result<ConnectionManager, StoreError> {
        let conn = self
            .conn
            .get_or_try_init(|| {
                ConnectionManager::new_with_config(self.client.clone(), manager_config())
            })
            .await?;
        Ok(conn.clone())
    }
}

/// A client that speaks RESP3 (needed for pub/sub on a multiplexed connection).
pub fn resp3_client(url: &str) -> Result<Client, StoreError> {
    let info = url.into_connection_info()?;
    let settings = info
        .redis_settings()
        .clone()
        .set_protocol(ProtocolVersion::RESP3);
    Ok(Client::open(info.set_redis_settings(settings))?)
}

/// Fail fast while Redis is away: a stuck request holds a client's connection
/// and, worse, a lock. A paused Redis shows up as a timeout after a second.
pub fn manager_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(500)))
        .set_response_timeout(Some(Duration::from_secs(1)))
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(500))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_of_a_sku_shares_its_hash_tag() {
        let keys = Keys::new(&Sku::parse("A-1").unwrap());
        for key in [
            &keys.stock,
            &keys.ledger,
            &keys.units,
            &keys.served,
            &keys.lock,
            &keys.requests,
            &keys.fence,
            &keys.sections,
        ] {
            assert!(key.ends_with(":{A-1}"), "{key}");
        }
    }
}
