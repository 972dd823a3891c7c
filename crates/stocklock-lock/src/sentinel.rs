//! The store's Sentinel backend: the master is whoever the Sentinels name.
//!
//! Every (re)connection asks the Sentinels (redis-rs's
//! [`redis::sentinel::Sentinel`], which also checks with `ROLE` that the
//! server it names calls itself master); a command that fails in a way that
//! says the connection or the master is gone (I/O error, dropped
//! connection, timeout, `READONLY` from a demoted master) forgets the
//! connection, so the next command asks again. While the master is dead and
//! not yet replaced, each command fails at once, unsent (a 503
//! `store_unavailable` to the buyer, never `unknown`), and
//! the Sentinels are asked at most every [`RETRY_AFTER`]; once they have
//! promoted a replica, the next command goes to it, no restart needed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::sentinel::{Sentinel, SentinelNodeConnectionInfo};
use redis::{
    AsyncConnectionConfig, Client, ErrorKind, ProtocolVersion, RedisConnectionInfo, RedisError,
    RedisFuture, ServerErrorKind,
};

/// How long a failed look-up is remembered: commands in the meantime fail
/// at once with its error instead of each asking the Sentinels again.
pub const RETRY_AFTER: Duration = Duration::from_millis(100);

/// Bounds one look-up (the Sentinels, then `ROLE` on the master they name).
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);

/// `host:port` or `redis://host:port` → `redis://host:port`.
pub fn sentinel_url(address: &str) -> String {
    if address.contains("://") {
        address.to_owned()
    } else {
        format!("redis://{address}")
    }
}

/// The master of one name, as the Sentinels see it, and the connection to
/// it. Shared by every clone of a [`SentinelConn`].
///
/// ```no_run
/// use stocklock_lock::sentinel::Follower;
///
/// # async fn example() -> Result<(), redis::RedisError> {
/// let sentinels = ["127.0.0.1:26379".to_owned(), "redis://127.0.0.1:26380".to_owned()];
/// let follower = Follower::new(&sentinels, "mymaster")?; // nothing connected yet
/// let master = follower.master_client().await?; // the master they name now
/// # drop(master);
/// # Ok(())
/// # }
/// ```
pub struct Follower {
    master_name: String,
    /// One look-up at a time; the last failure, to fail fast after it.
    lookup: tokio::sync::Mutex<Lookup>,
    current: Mutex<Option<Current>>,
    generations: AtomicU64,
}

struct Lookup {
    sentinel: Sentinel,
    failed: Option<(Instant, RedisError)>,
}

/// The connection to the master as last resolved.
#[derive(Clone)]
struct Current {
    generation: u64,
    conn: MultiplexedConnection,
}

impl Follower {
    /// A follower of `master_name` at these Sentinels (`host:port` or
    /// `redis://host:port`). Nothing is connected yet.
    pub fn new(sentinels: &[String], master_name: &str) -> Result<Self, RedisError> {
        if sentinels.is_empty() {
            return Err(RedisError::from((
                ErrorKind::InvalidClientConfig,
                "Sentinel needs at least one address",
            )));
        }
        let urls: Vec<String> = sentinels.iter().map(|s| sentinel_url(s)).collect();
        Ok(Self {
            master_name: master_name.to_owned(),
            lookup: tokio::sync::Mutex::new(Lookup {
                sentinel: Sentinel::build(urls)?,
                failed: None,
            }),
            current: Mutex::new(None),
            generations: AtomicU64::new(0),
        })
    }

    /// A RESP3 client of the master the Sentinels name now (checked with
    /// `ROLE`); an error while there is none (it is down and not yet
    /// replaced, or no Sentinel answers).
    pub async fn master_client(&self) -> Result<Client, RedisError> {
        let mut lookup = self.lookup.lock().await;
        self.look_up(&mut lookup).await
    }

    async fn look_up(&self, lookup: &mut Lookup) -> Result<Client, RedisError> {
        let node = SentinelNodeConnectionInfo::default().set_redis_connection_info(
            RedisConnectionInfo::default().set_protocol(ProtocolVersion::RESP3),
        );
        let found = tokio::time::timeout(
            LOOKUP_TIMEOUT,
            lookup
                .sentinel
                .async_master_for(&self.master_name, Some(&node)),
        )
        .await;
        match found {
            Ok(found) => found,
            Err(_) => Err(RedisError::from((
                ErrorKind::Io,
                "the Sentinels did not name a master in time",
            ))),
        }
    }

    /// The connection to the master, resolving it first when there is none.
    async fn connection(&self) -> Result<Current, RedisError> {
        if let Some(current) = self.current() {
            return Ok(current);
        }
        let mut lookup = self.lookup.lock().await;
        // Someone else may have connected while this one waited.
        if let Some(current) = self.current() {
            return Ok(current);
        }
        if let Some((at, err)) = &lookup.failed
            && at.elapsed() < RETRY_AFTER
        {
            return Err(err.clone());
        }
        let connected = async {
            let client = self.look_up(&mut lookup).await?;
            client
                .get_multiplexed_async_connection_with_config(&connection_config())
                .await
        }
        .await;
        match connected {
            Ok(conn) => {
                lookup.failed = None;
                let current = Current {
                    generation: self.generations.fetch_add(1, Ordering::Relaxed) + 1,
                    conn,
                };
                *self.slot() = Some(current.clone());
                Ok(current)
            }
            Err(err) => {
                let err = unsent(&err);
                lookup.failed = Some((Instant::now(), err.clone()));
                Err(err)
            }
        }
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Current>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn current(&self) -> Option<Current> {
        self.slot().clone()
    }

    /// Forgets connection `generation` (not a newer one someone made since).
    fn forget(&self, generation: u64) {
        let mut slot = self.slot();
        if slot.as_ref().is_some_and(|c| c.generation == generation) {
            *slot = None;
        }
    }
}

/// No master to send to (none named, or the one named does not answer):
/// the command was never sent, and the error says so as a refused
/// connection does ([`crate::section::nothing_sent`]: the buyer is told
/// nothing happened, not "unknown").
fn unsent(err: &RedisError) -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        format!("no Redis master to send to: {err}"),
    ))
}

/// The same timeouts as the single server's connection manager: fail fast
/// while Redis is away.
fn connection_config() -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(500)))
        .set_response_timeout(Some(Duration::from_secs(1)))
}

/// Whether `err` says the master (or the way to it) is gone: the
/// connection is dropped and the next command asks the Sentinels again.
pub fn lost_master(err: &RedisError) -> bool {
    err.is_io_error()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.is_timeout()
        || err.is_unrecoverable_error()
        || matches!(
            err.kind(),
            ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
        )
}

/// A connection to whichever server the Sentinels name master. Cheap to
/// clone; every clone shares one multiplexed connection.
///
/// ```no_run
/// use stocklock_lock::store::{Conn, Store};
///
/// # async fn example() -> Result<(), stocklock_lock::Error> {
/// let store = Store::open_sentinel(&["127.0.0.1:26379".to_owned()], "mymaster")?;
/// let Conn::Sentinel(mut conn) = store.conn().await? else { unreachable!() };
/// // Sent to the master the Sentinels name; after a failover, to the new one.
/// let pong: String = redis::cmd("PING").query_async(&mut conn).await?;
/// # drop(pong);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct SentinelConn(pub(super) Arc<Follower>);

impl ConnectionLike for SentinelConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> RedisFuture<'a, redis::Value> {
        Box::pin(async move {
            let mut current = self.0.connection().await?;
            let answer = current.conn.req_packed_command(cmd).await;
            if let Err(err) = &answer
                && lost_master(err)
            {
                self.0.forget(current.generation);
            }
            answer
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<redis::Value>> {
        Box::pin(async move {
            let mut current = self.0.connection().await?;
            let answer = current
                .conn
                .req_packed_commands(pipeline, offset, count)
                .await;
            if let Err(err) = &answer
                && lost_master(err)
            {
                self.0.forget(current.generation);
            }
            answer
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_master_to_send_to_reads_as_a_refused_connection() {
        let err = RedisError::from((
            ErrorKind::MasterNameNotFoundBySentinel,
            "Master with given name not found in sentinel",
        ));
        let unsent = unsent(&err);
        // A refused connection is what the section reads as "nothing sent".
        assert!(unsent.is_connection_refusal(), "{unsent}");
        assert!(
            unsent.to_string().contains("not found in sentinel"),
            "{unsent}"
        );
    }

    #[test]
    fn a_demoted_master_or_a_dropped_connection_is_a_lost_master() {
        let readonly = RedisError::from((
            ErrorKind::Server(ServerErrorKind::ReadOnly),
            "You can't write against a read only replica.",
        ));
        assert!(lost_master(&readonly));
        let dropped = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(lost_master(&dropped));
        let script = RedisError::from((
            ErrorKind::Server(ServerErrorKind::ResponseError),
            "ERR something the script refused",
        ));
        assert!(!lost_master(&script));
    }

    #[test]
    fn sentinel_addresses_become_urls() {
        assert_eq!(sentinel_url("127.0.0.1:26379"), "redis://127.0.0.1:26379");
        assert_eq!(sentinel_url("redis://h:1"), "redis://h:1");
    }
}
