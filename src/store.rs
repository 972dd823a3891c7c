//! The Redis handle and the key layout of one SKU.
//!
//! Every key of a SKU carries the hash tag `{sku}`, so all of them live in one
//! Redis Cluster slot and every multi-key script stays valid on a cluster.
//!
//! The store is one Redis server, a Redis Cluster, or a master found
//! through Sentinel ([`sentinel`]: followed across failovers). Its handle
//! ([`Store`], [`Conn`]) is the lock library's: the locks take the same
//! connections.

use std::time::Duration;

use redis::aio::ConnectionLike;
pub use stocklock_lock::sentinel;
pub use stocklock_lock::store::{Conn, Store, manager_config, resp3_client};

use crate::knobs::Sku;

/// The name `up --replica`'s Sentinels know the master by, and `serve
/// --sentinel-master`'s default.
pub const SENTINEL_MASTER: &str = "stocklock";

/// Redis did not answer, or answered with an error. Always a 503 to clients:
/// the request did not reach a decision.
#[derive(Debug, thiserror::Error)]
#[error("redis: {0}")]
pub struct StoreError(#[from] pub redis::RedisError);

impl From<stocklock_lock::Error> for StoreError {
    /// A lock's error, as the store's: Redis's own error when it is one,
    /// else (another store of a lock) as an I/O error with its message.
    fn from(err: stocklock_lock::Error) -> Self {
        match err {
            stocklock_lock::Error::Redis(err) => StoreError(err),
            other => StoreError(std::io::Error::other(other.to_string()).into()),
        }
    }
}

/// The keys of one SKU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys {
    /// `stock:{sku}`: the remaining stock, the value the critical section reads and writes.
    pub stock: String,
    /// `ledger:{sku}`: hash of `initial`, `sold`, `duplicates`, `busy`, `lost_locks`.
    pub ledger: String,
    /// `units:{sku}`: bitfield of two bits per unit: times sold (saturating at 3).
    pub units: String,
    /// `served:{sku}`: hash of instance → requests answered.
    pub served: String,
    /// `lock:{sku}`: the lock every lock variant takes.
    pub lock: String,
    /// `requests:{sku}`: hash of request_id → outcome, for idempotent retries.
    pub requests: String,
    /// `request_times:{sku}`: sorted set of request_id by when it was first
    /// seen, so that ids older than their time to live are forgotten.
    pub request_times: String,
    /// `fence:{sku}`: the fencing token counter (INCR at every acquisition; never reset).
    pub fence: String,
    /// `sections:{sku}`: the timeline's list of critical sections, in
    /// batches (`crate::timeline`), the overlap witness.
    pub sections: String,
    /// `orders:{sku}`: the order pipeline's stream of sales (`lua-stream`,
    /// `lua-then-queue`), read by the workers' consumer group.
    pub orders: String,
    /// `returns:{sku}`: hash of sale number → unit, one field per expired
    /// reservation whose unit went back to the stock (a second return of
    /// the same sale finds its field and changes nothing).
    pub returns: String,
    /// `returned_units:{sku}`: list of the units given back and not yet sold
    /// again; every sale path sells these first.
    pub returned_units: String,
    /// `epochs:{sku}`: sorted set of every epoch a reset opened (score: the
    /// epoch), kept across resets, so that reconcile can tell an order of a
    /// past epoch from one whose ledger Redis lost.
    pub epochs: String,
    /// The hash tag's content: the SKU, or `SKU#b` for bucket b of a sharded SKU.
    pub tag: String,
}

impl Keys {
    pub fn new(sku: &Sku) -> Self {
        Self::tagged(sku.as_str())
    }

    /// The keys of bucket `b` of this SKU's stock (`lua-sharded`): a tag of
    /// its own, so the buckets spread over the slots (and a cluster's
    /// masters). `#` cannot occur in a SKU, so no SKU's keys collide with them.
    pub fn bucket(&self, b: u32) -> Self {
        Self::tagged(&format!("{}#{b}", self.tag))
    }

    /// The keys of the SKU or bucket whose hash tag holds `name` (a SKU
    /// read back from Redis, already checked when it was written).
    pub fn tagged_with(name: &str) -> Self {
        Self::tagged(name)
    }

    fn tagged(name: &str) -> Self {
        let tag = format!("{{{name}}}");
        Self {
            stock: format!("stock:{tag}"),
            ledger: format!("ledger:{tag}"),
            units: format!("units:{tag}"),
            served: format!("served:{tag}"),
            lock: format!("lock:{tag}"),
            requests: format!("requests:{tag}"),
            request_times: format!("request_times:{tag}"),
            fence: format!("fence:{tag}"),
            sections: format!("sections:{tag}"),
            orders: format!("orders:{tag}"),
            returns: format!("returns:{tag}"),
            returned_units: format!("returned_units:{tag}"),
            epochs: format!("epochs:{tag}"),
            tag: name.to_owned(),
        }
    }
}

/// The cluster when `cluster` names any node, else the Redis at `url`
/// (how `serve --redis-url / --redis-cluster` reads).
pub fn open_either(url: &str, cluster: &[String]) -> Result<Store, StoreError> {
    Ok(if cluster.is_empty() {
        Store::open(url)?
    } else {
        Store::open_cluster(cluster)?
    })
}

/// The master of `sentinels` when any is named, else as [`open_either`]
/// (`serve --sentinel` wins over `--redis-url`).
pub fn open_any(
    url: &str,
    cluster: &[String],
    sentinels: &[String],
    master_name: &str,
) -> Result<Store, StoreError> {
    if sentinels.is_empty() {
        open_either(url, cluster)
    } else {
        Ok(Store::open_sentinel(sentinels, master_name)?)
    }
}

/// `WAIT numreplicas timeout`: blocks until the writes this connection
/// made before it reached `replicas` replicas, or `timeout` passed (0:
/// forever); how many replicas acknowledged them. The mitigation that
/// narrows (but does not close) the failover window: a lock whose SET was
/// not acknowledged by a replica may be lost when the master dies. Send it
/// on the connection that wrote (a [`Conn::Plain`] or a single server's,
/// not a cluster's routed one).
pub async fn wait_replicas<C: ConnectionLike + Send>(
    conn: &mut C,
    replicas: i64,
    timeout: Duration,
) -> Result<i64, StoreError> {
    Ok(redis::cmd("WAIT")
        .arg(replicas)
        .arg(timeout.as_millis() as u64)
        .query_async(conn)
        .await?)
}

/// Runs `script` by its hash (EVALSHA) with `keys`, then the arguments
/// `args` adds, all written straight into one command. redis-rs's
/// `ScriptInvocation` copies each key and argument into a buffer of its
/// own before it builds the same command: a score of allocations a sale
/// on the hot path. As redis-rs does, a Redis that does not know the
/// script (NOSCRIPT: nothing ran) is given it and asked again.
pub async fn evalsha<T: redis::FromRedisValue>(
    conn: &mut Conn,
    script: &redis::Script,
    keys: &[&str],
    args: impl FnOnce(&mut redis::Cmd),
) -> redis::RedisResult<T> {
    // EVALSHA, the hash, the key count, the keys and about as many arguments.
    let size = 64 + keys.iter().map(|key| key.len() + 16).sum::<usize>() * 2;
    let mut cmd = redis::Cmd::with_capacity(3 + keys.len() * 3, size);
    cmd.arg("EVALSHA").arg(script.get_hash()).arg(keys.len());
    for key in keys {
        cmd.arg(*key);
    }
    args(&mut cmd);
    match cmd.query_async(conn).await {
        Err(err)
            if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
                && !loaded_before(script) =>
        {
            script.load_async(conn).await?;
            cmd.query_async(conn).await
        }
        answer => answer,
    }
}

/// Set by the live mutant `no-script-reload` (debug builds only).
static ONCE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// From now on [`evalsha`] gives Redis each script once and never again,
/// as a program that loads its scripts when it starts: a Redis restarted
/// since has forgotten them, and every call is refused (NOSCRIPT). The
/// live mutant `no-script-reload` alone calls this.
pub fn give_scripts_once() {
    ONCE.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether this process gave Redis `script` before and, after
/// [`give_scripts_once`], will not again.
fn loaded_before(script: &redis::Script) -> bool {
    static LOADED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    if !ONCE.load(std::sync::atomic::Ordering::Relaxed) {
        return false;
    }
    let mut loaded = LOADED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let hash = script.get_hash().to_owned();
    match loaded.contains(&hash) {
        true => true,
        false => {
            loaded.push(hash);
            false
        }
    }
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
            &keys.request_times,
            &keys.fence,
            &keys.sections,
        ] {
            assert!(key.ends_with(":{A-1}"), "{key}");
        }
        let bucket = keys.bucket(3);
        assert_eq!(bucket.stock, "stock:{A-1#3}");
        assert_eq!(bucket.ledger, "ledger:{A-1#3}");
        let slot = redis::cluster_routing::Slot::for_key;
        assert_eq!(slot(&bucket.stock), slot(&bucket.requests));
        assert_ne!(slot(&bucket.stock), slot(&keys.stock));
    }
}
