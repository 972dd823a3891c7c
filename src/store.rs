//! The Redis handle and the key layout of one SKU.
//!
//! Every key of a SKU carries the hash tag `{sku}`, so all of them live in one
//! Redis Cluster slot and every multi-key script stays valid on a cluster.
//!
//! The store is one Redis server, a Redis Cluster, or a master found
//! through Sentinel ([`sentinel`]: followed across failovers).

pub mod sentinel;

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Client, IntoConnectionInfo, ProtocolVersion, RedisFuture};
use tokio::sync::OnceCell;

use self::sentinel::{Follower, SentinelConn};
use crate::knobs::Sku;

/// The name `up --replica`'s Sentinels know the master by, and `serve
/// --sentinel-master`'s default.
pub const SENTINEL_MASTER: &str = "stocklock";

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

/// One connection to the store, whichever kind it is: a single Redis (a
/// reconnecting [`ConnectionManager`]) or a Redis Cluster (redis-rs routes
/// each command by its key's slot). Cheap to clone; every clone pipelines
/// over the same sockets. Scripts work on both because all keys of one SKU
/// share a hash tag.
///
/// A single server's command refused at connect is sent once more: the
/// manager hands the first command after an outage the failure of the
/// reconnection it tried while Redis was down (and only then reconnects),
/// so that command failed although Redis was back (the lab's first look at
/// the order stream after `redis-data-loss` did, in CI). A refused
/// connection sent nothing, so nothing runs twice.
#[derive(Clone)]
pub enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
    /// A plain multiplexed connection that does not reconnect by itself
    /// (Redlock's nodes: a dead node must fail at once, not after retries).
    Plain(MultiplexedConnection),
    /// The master the Sentinels name, asked again after a lost connection.
    Sentinel(SentinelConn),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> RedisFuture<'a, redis::Value> {
        match self {
            Conn::Single(conn) => Box::pin(async move {
                match conn.req_packed_command(cmd).await {
                    Err(err) if err.is_connection_refusal() => conn.req_packed_command(cmd).await,
                    answer => answer,
                }
            }),
            Conn::Cluster(conn) => conn.req_packed_command(cmd),
            Conn::Plain(conn) => conn.req_packed_command(cmd),
            Conn::Sentinel(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Conn::Single(conn) => Box::pin(async move {
                match conn.req_packed_commands(pipeline, offset, count).await {
                    Err(err) if err.is_connection_refusal() => {
                        conn.req_packed_commands(pipeline, offset, count).await
                    }
                    answer => answer,
                }
            }),
            Conn::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
            Conn::Plain(conn) => conn.req_packed_commands(pipeline, offset, count),
            Conn::Sentinel(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(conn) => conn.get_db(),
            Conn::Cluster(conn) => conn.get_db(),
            Conn::Plain(conn) => conn.get_db(),
            Conn::Sentinel(conn) => conn.get_db(),
        }
    }
}

/// What a [`Store`] talks to.
#[derive(Clone)]
enum Backend {
    Single,
    Cluster(Box<ClusterClient>),
    Sentinel(Arc<Follower>),
}

/// A cheap-to-clone handle on the store: one Redis server, a Redis Cluster,
/// or the master a set of Sentinels names.
///
/// The connection is made on first use, not at start-up, so an instance
/// started before its Redis answers 503 until Redis is there instead of
/// refusing to start. Once made, it reconnects by itself; a request during
/// an outage fails fast rather than queueing.
#[derive(Clone)]
pub struct Store {
    /// The single server, or the cluster's first node: pub/sub and the
    /// chaos actions use it (a PUBLISH anywhere in a cluster reaches the
    /// subscribers of every node).
    client: Client,
    backend: Backend,
    conn: Arc<OnceCell<Conn>>,
    /// The URL of a single Redis, as given (`None`: a cluster or Sentinel).
    url: Option<String>,
}

impl Store {
    /// Opens a handle on `url` (`redis://host:port/db`). Nothing is connected yet.
    /// RESP3 is used so that the same client can carry pub/sub pushes.
    pub fn open(url: &str) -> Result<Self, StoreError> {
        Ok(Self {
            client: resp3_client(url)?,
            backend: Backend::Single,
            conn: Arc::new(OnceCell::new()),
            url: Some(url.to_owned()),
        })
    }

    /// Opens a handle on a Redis Cluster, given one or more of its nodes
    /// (the rest are discovered). Nothing is connected yet.
    pub fn open_cluster(urls: &[String]) -> Result<Self, StoreError> {
        let first = urls.first().ok_or_else(|| {
            StoreError(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "a cluster needs at least one node URL",
            )))
        })?;
        // No retries: redis-rs's cluster client sends a request again on a
        // new connection when its connection drops, and a sale script (or
        // a lock's SET NX) that ran before the drop would run twice. As on
        // one server, a request whose answer never came fails, and a sale
        // sent is answered `unknown`. (A MOVED or ASK is not followed
        // either: that request fails once while the client refreshes its
        // slot map for the next.)
        let cluster = ClusterClient::builder(urls.iter().map(String::as_str))
            .connection_timeout(Duration::from_millis(500))
            .response_timeout(Duration::from_secs(1))
            .retries(0)
            .build()?;
        Ok(Self {
            client: resp3_client(first)?,
            backend: Backend::Cluster(Box::new(cluster)),
            conn: Arc::new(OnceCell::new()),
            url: None,
        })
    }

    /// Opens a handle on the master that `sentinels` (`host:port` or
    /// `redis://host:port`) know as `master_name`. Nothing is connected
    /// yet; each (re)connection asks them who the master is.
    pub fn open_sentinel(sentinels: &[String], master_name: &str) -> Result<Self, StoreError> {
        let follower = Follower::new(sentinels, master_name)?;
        let first = sentinels.first().map(String::as_str).unwrap_or_default();
        Ok(Self {
            client: resp3_client(&sentinel::sentinel_url(first))?,
            backend: Backend::Sentinel(Arc::new(follower)),
            conn: Arc::new(OnceCell::new()),
            url: None,
        })
    }

    /// The cluster when `cluster` names any node, else the Redis at `url`
    /// (how `serve --redis-url / --redis-cluster` reads).
    pub fn open_either(url: &str, cluster: &[String]) -> Result<Self, StoreError> {
        if cluster.is_empty() {
            Self::open(url)
        } else {
            Self::open_cluster(cluster)
        }
    }

    /// The master of `sentinels` when any is named, else as
    /// [`open_either`](Self::open_either) (`serve --sentinel` wins over
    /// `--redis-url`).
    pub fn open_any(
        url: &str,
        cluster: &[String],
        sentinels: &[String],
        master_name: &str,
    ) -> Result<Self, StoreError> {
        if sentinels.is_empty() {
            Self::open_either(url, cluster)
        } else {
            Self::open_sentinel(sentinels, master_name)
        }
    }

    /// Whether this store is a Redis Cluster.
    /// The URL of a single Redis, as it was opened (`None`: a cluster or
    /// Sentinel): what a tool started for this store connects to.
    pub fn single_url(&self) -> Option<&str> {
        self.url.as_deref()
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self.backend, Backend::Cluster(_))
    }

    /// Whether this store finds its master through Sentinel.
    pub fn is_sentinel(&self) -> bool {
        matches!(self.backend, Backend::Sentinel(_))
    }

    /// The client of the single server (of the first node on a cluster),
    /// for connections of another kind. A Sentinel store has no fixed
    /// server: this is its first Sentinel's; use
    /// [`master_client`](Self::master_client), which works for every kind.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// A RESP3 client of the server to open connections of another kind on
    /// (the pub/sub listener, chaos mode's own connections): the single
    /// server, the cluster's first node, or the master the Sentinels name
    /// right now (an error while they name none that answers as master).
    pub async fn master_client(&self) -> Result<Client, StoreError> {
        match &self.backend {
            Backend::Sentinel(follower) => Ok(follower.master_client().await?),
            Backend::Single | Backend::Cluster(_) => Ok(self.client.clone()),
        }
    }

    /// A multiplexed connection: cloning it is cheap and all clones pipeline
    /// their commands over the same sockets.
    pub async fn conn(&self) -> Result<Conn, StoreError> {
        let conn = self
            .conn
            .get_or_try_init(|| async {
                Ok::<_, StoreError>(match &self.backend {
                    Backend::Single => Conn::Single(
                        ConnectionManager::new_with_config(self.client.clone(), manager_config())
                            .await?,
                    ),
                    Backend::Cluster(cluster) => {
                        Conn::Cluster(cluster.get_async_connection().await?)
                    }
                    Backend::Sentinel(follower) => Conn::Sentinel(SentinelConn(follower.clone())),
                })
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
        Err(err) if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
            script.load_async(conn).await?;
            cmd.query_async(conn).await
        }
        answer => answer,
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
