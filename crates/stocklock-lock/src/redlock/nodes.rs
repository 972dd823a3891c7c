//! Redlock's nodes: independent Redis servers, each asked on a connection
//! of its own and given a short timeout, so that a dead node costs little.

use std::time::Duration;

use futures_util::future::join_all;
use redis::aio::MultiplexedConnection;

use super::Redlock;
use crate::Error;
use crate::store::Conn;
use crate::{Hook, Point};

/// How long one node may take to answer one command before it counts as
/// down: small against any lease, as the algorithm asks, so that a dead node
/// costs the acquisition little.
pub const NODE_TIMEOUT: Duration = Duration::from_millis(100);

/// One Redlock node: a connection made on demand and dropped on the first
/// error other than a timeout, so that a dead node costs one refused
/// connect (immediate on loopback) rather than a reconnecting client's
/// retries and back-off. Every command to the node goes over its one
/// connection, so the node runs them in the order they were sent: a
/// release never overtakes the SET it undoes.
struct Node {
    client: redis::Client,
    /// Held while a connection is made: callers that find none wait for
    /// that one rather than each making their own.
    conn: tokio::sync::Mutex<Option<MultiplexedConnection>>,
}

impl Node {
    async fn conn(&self, timeout: Duration) -> Result<Conn, Error> {
        let mut slot = self.conn.lock().await;
        if let Some(conn) = slot.as_ref() {
            return Ok(Conn::Plain(conn.clone()));
        }
        // No response timeout of the connection's own: the node timeout
        // (`ask_every_node`'s) bounds every command, and a second clock
        // would only be another way for a slow node to look failed.
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(None);
        let conn = self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        *slot = Some(conn.clone());
        Ok(Conn::Plain(conn))
    }

    /// Forgets the connection after a failure: the next command reconnects.
    async fn broken(&self) {
        *self.conn.lock().await = None;
    }
}

/// The independent Redis servers of one deployment (`--redlock-nodes`).
/// Cheap to clone; connections are made on first use.
///
/// ```no_run
/// use std::time::Duration;
/// use stocklock_lock::{OwnerId, RedlockNodes, Refused, Watchdog};
///
/// # async fn example() -> anyhow::Result<()> {
/// let urls: Vec<String> = (1..=5).map(|i| format!("redis://redlock-{i}:6379")).collect();
/// let lock = RedlockNodes::open(&urls)?.lock("lock:{order-42}");
/// let me = OwnerId::new("worker-1");
/// match lock.lock(&me, Duration::from_secs(10), Duration::from_secs(2)).await? {
///     Ok(grant) => {
///         // Held on a majority until grant.deadline(); renewed on all of them:
///         let dog = Watchdog::for_grant(lock.clone(), me.clone(), &grant);
///         // ... work, checking !dog.tenure().is_lost() before writing ...
///         dog.stop();
///         lock.unlock(&me).await; // on every node
///     }
///     Err(Refused::Held) => { /* someone else holds it on a majority */ }
///     Err(Refused::NoQuorum { answered, quorum }) => {
///         anyhow::bail!("{answered} nodes answered, {quorum} needed");
///     }
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedlockNodes {
    nodes: std::sync::Arc<[Node]>,
    node_timeout: Duration,
}

impl RedlockNodes {
    /// Handles on `urls`; nothing is connected yet.
    pub fn open(urls: &[String]) -> Result<Self, Error> {
        let nodes = urls
            .iter()
            .map(|url| {
                Ok(Node {
                    client: redis::Client::open(url.as_str())?,
                    conn: tokio::sync::Mutex::new(None),
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Self {
            nodes: nodes.into(),
            node_timeout: NODE_TIMEOUT,
        })
    }

    /// The same nodes with another per-node timeout.
    pub fn with_node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = timeout;
        self
    }

    /// How many nodes there are.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether there are no nodes (never, once opened).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// How many nodes make a majority.
    pub fn quorum(&self) -> usize {
        self.nodes.len() / 2 + 1
    }

    /// Runs `op` on every node at once, each bounded by the node timeout:
    /// its answer, or `None` for a node that failed or did not answer in
    /// time. A failed node's connection is dropped (the next command
    /// reconnects); a slow node keeps its connection, so its commands run
    /// in the order they were sent.
    pub(super) async fn ask_every_node<T, F, Fut>(&self, op: F) -> Vec<Option<T>>
    where
        F: Fn(Conn) -> Fut,
        Fut: std::future::Future<Output = Result<T, Error>>,
    {
        self.ask_every_node_at(&Hook::none(), ("", ""), op).await
    }

    /// [`RedlockNodes::ask_every_node`], each node's question held first
    /// at `hook`'s point `before` for that node (`vote:K`), outside the
    /// node timeout (a held vote is a slow node's, not a dead one's), and
    /// its answer (or its failure) reached at `after` (`voted:K`).
    pub(super) async fn ask_every_node_at<T, F, Fut>(
        &self,
        hook: &Hook,
        (before, after): (&'static str, &'static str),
        op: F,
    ) -> Vec<Option<T>>
    where
        F: Fn(Conn) -> Fut,
        Fut: std::future::Future<Output = Result<T, Error>>,
    {
        let timeout = self.node_timeout;
        join_all(self.nodes.iter().enumerate().map(|(k, node)| {
            let op = &op;
            async move {
                hook.at(Point::nth(before, k)).await;
                let ask = async { op(node.conn(timeout).await?).await };
                let answer = match tokio::time::timeout(timeout, ask).await {
                    Ok(Ok(answer)) => Some(answer),
                    // Slow, not gone: the connection is kept. What was sent
                    // on it may still run, and whatever is sent next (the
                    // release of a SET that answered late) must run after
                    // it; on a new connection it could overtake it, or
                    // never reach a node that is still stalled.
                    Err(_) => None,
                    Ok(Err(_)) => {
                        node.broken().await;
                        None
                    }
                };
                hook.at(Point::nth(after, k)).await;
                answer
            }
        }))
        .await
    }

    /// The lock on `key`, on every node.
    pub fn lock(&self, key: impl Into<String>) -> Redlock {
        Redlock {
            nodes: self.clone(),
            key: key.into(),
            announce: None,
            hook: Hook::none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_majority_of_five_is_three() {
        let urls: Vec<String> = (0..5)
            .map(|i| format!("redis://127.0.0.1:{}", 1 + i))
            .collect();
        let nodes = RedlockNodes::open(&urls).unwrap();
        assert_eq!(nodes.quorum(), 3);
        let urls = &urls[..4];
        assert_eq!(RedlockNodes::open(urls).unwrap().quorum(), 3);
    }
}
