//! The handle on a Redis store the locks take their connections from: one
//! server, a Redis Cluster (feature `cluster`), or the master a set of
//! Sentinels names (feature `sentinel`, followed across failovers).
//!
//! ```no_run
//! # async fn f() -> Result<(), stocklock_lock::Error> {
//! use stocklock_lock::store::Store;
//!
//! let store = Store::open("redis://127.0.0.1:6379")?; // nothing connected yet
//! let conn = store.conn().await?; // connects once; clones share it
//! # drop(conn);
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
#[cfg(feature = "cluster")]
use redis::cluster::ClusterClient;
#[cfg(feature = "cluster")]
use redis::cluster_async::ClusterConnection;
use redis::{Client, IntoConnectionInfo, ProtocolVersion, RedisFuture};
use tokio::sync::OnceCell;

use crate::Error;
#[cfg(feature = "sentinel")]
use crate::sentinel::{self, Follower, SentinelConn};

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
///
/// ```no_run
/// use stocklock_lock::store::Store;
///
/// # async fn example() -> Result<(), stocklock_lock::Error> {
/// let conn = Store::open("redis://127.0.0.1:6379")?.conn().await?;
/// let pong: String = redis::cmd("PING").query_async(&mut conn.clone()).await?;
/// assert_eq!(pong, "PONG");
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub enum Conn {
    /// One Redis server, through a reconnecting manager.
    Single(ConnectionManager),
    /// A Redis Cluster's connection, routed by slot.
    #[cfg(feature = "cluster")]
    Cluster(ClusterConnection),
    /// A plain multiplexed connection that does not reconnect by itself
    /// (Redlock's nodes: a dead node must fail at once, not after retries).
    Plain(MultiplexedConnection),
    /// The master the Sentinels name, asked again after a lost connection.
    #[cfg(feature = "sentinel")]
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
            #[cfg(feature = "cluster")]
            Conn::Cluster(conn) => conn.req_packed_command(cmd),
            Conn::Plain(conn) => conn.req_packed_command(cmd),
            #[cfg(feature = "sentinel")]
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
            #[cfg(feature = "cluster")]
            Conn::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
            Conn::Plain(conn) => conn.req_packed_commands(pipeline, offset, count),
            #[cfg(feature = "sentinel")]
            Conn::Sentinel(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(conn) => conn.get_db(),
            #[cfg(feature = "cluster")]
            Conn::Cluster(conn) => conn.get_db(),
            Conn::Plain(conn) => conn.get_db(),
            #[cfg(feature = "sentinel")]
            Conn::Sentinel(conn) => conn.get_db(),
        }
    }
}

/// What a [`Store`] talks to.
#[derive(Clone)]
enum Backend {
    Single,
    #[cfg(feature = "cluster")]
    Cluster(Box<ClusterClient>),
    #[cfg(feature = "sentinel")]
    Sentinel(Arc<Follower>),
}

/// A cheap-to-clone handle on the store: one Redis server, a Redis Cluster,
/// or the master a set of Sentinels names.
///
/// The connection is made on first use, not at start-up, so an instance
/// started before its Redis answers 503 until Redis is there instead of
/// refusing to start. Once made, it reconnects by itself; a request during
/// an outage fails fast rather than queueing.
///
/// ```
/// use stocklock_lock::store::Store;
///
/// let store = Store::open("redis://127.0.0.1:6379/0")?; // nothing connected yet
/// assert_eq!(store.single_url(), Some("redis://127.0.0.1:6379/0"));
/// assert!(!store.is_cluster() && !store.is_sentinel());
/// // `store.conn().await` connects on first use; after an error the next call tries again.
/// # Ok::<(), stocklock_lock::Error>(())
/// ```
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
    pub fn open(url: &str) -> Result<Self, Error> {
        Ok(Self {
            client: resp3_client(url)?,
            backend: Backend::Single,
            conn: Arc::new(OnceCell::new()),
            url: Some(url.to_owned()),
        })
    }

    #[cfg(feature = "cluster")]
    /// Opens a handle on a Redis Cluster, given one or more of its nodes
    /// (the rest are discovered). Nothing is connected yet.
    pub fn open_cluster(urls: &[String]) -> Result<Self, Error> {
        let first = urls.first().ok_or_else(|| {
            Error::Redis(redis::RedisError::from((
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

    #[cfg(feature = "sentinel")]
    /// Opens a handle on the master that `sentinels` (`host:port` or
    /// `redis://host:port`) know as `master_name`. Nothing is connected
    /// yet; each (re)connection asks them who the master is.
    pub fn open_sentinel(sentinels: &[String], master_name: &str) -> Result<Self, Error> {
        let follower = Follower::new(sentinels, master_name)?;
        let first = sentinels.first().map(String::as_str).unwrap_or_default();
        Ok(Self {
            client: resp3_client(&sentinel::sentinel_url(first))?,
            backend: Backend::Sentinel(Arc::new(follower)),
            conn: Arc::new(OnceCell::new()),
            url: None,
        })
    }

    /// The URL of a single Redis, as it was opened (`None`: a cluster or
    /// Sentinel): what a tool started for this store connects to.
    pub fn single_url(&self) -> Option<&str> {
        self.url.as_deref()
    }

    /// Whether this store is a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        #[cfg(feature = "cluster")]
        return matches!(self.backend, Backend::Cluster(_));
        #[cfg(not(feature = "cluster"))]
        false
    }

    /// Whether this store finds its master through Sentinel.
    pub fn is_sentinel(&self) -> bool {
        #[cfg(feature = "sentinel")]
        return matches!(self.backend, Backend::Sentinel(_));
        #[cfg(not(feature = "sentinel"))]
        false
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
    pub async fn master_client(&self) -> Result<Client, Error> {
        match &self.backend {
            #[cfg(feature = "sentinel")]
            Backend::Sentinel(follower) => Ok(follower.master_client().await?),
            _ => Ok(self.client.clone()),
        }
    }

    /// A multiplexed connection: cloning it is cheap and all clones pipeline
    /// their commands over the same sockets.
    pub async fn conn(&self) -> Result<Conn, Error> {
        let conn = self
            .conn
            .get_or_try_init(|| async {
                Ok::<_, Error>(match &self.backend {
                    Backend::Single => Conn::Single(
                        ConnectionManager::new_with_config(self.client.clone(), manager_config())
                            .await?,
                    ),
                    #[cfg(feature = "cluster")]
                    Backend::Cluster(cluster) => {
                        Conn::Cluster(cluster.get_async_connection().await?)
                    }
                    #[cfg(feature = "sentinel")]
                    Backend::Sentinel(follower) => Conn::Sentinel(SentinelConn(follower.clone())),
                })
            })
            .await?;
        Ok(conn.clone())
    }
}

/// A client that speaks RESP3 (needed for pub/sub on a multiplexed connection).
pub fn resp3_client(url: &str) -> Result<Client, Error> {
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
