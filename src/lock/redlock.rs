//! Redlock: one lease lock taken on a majority of N independent Redis servers.
//!
//! Article 000's last answer to "what if the one Redis fails". The owner
//! sends `SET key token NX PX lease` to every node at once, each with a
//! short timeout, and holds the lock when a majority said yes *and* some of
//! the lease is left: validity = lease − time spent acquiring − clock drift.
//! Otherwise it releases whatever it got on every node and tries again after
//! a random delay, so that competing owners do not keep splitting the votes.
//! A release (and a renewal) goes to every node too.
//!
//! It survives a minority of nodes being down. What it does not survive is
//! what no timing-based lock survives: a holder that freezes past its
//! validity wakes up and writes (Kleppmann's pause), and a node that
//! restarts without persistence forgets a lock it granted, handing a second
//! owner its majority. A fencing token (`fenced`) or no lock at all (`lua`)
//! do not depend on timing; this lock does.

use std::time::{Duration, Instant};

use futures_util::future::join_all;

use super::wakeups::{Attempt, release_channel, wait_for_lock};
use super::{Grant, Lease, LeaseLock, OwnerId, Wakeups, drift};
use redis::aio::MultiplexedConnection;

use crate::store::{Conn, StoreError};

/// How long one node may take to answer one command before it counts as
/// down: small against any lease, as the algorithm asks, so that a dead node
/// costs the acquisition little.
pub const NODE_TIMEOUT: Duration = Duration::from_millis(100);

/// The random pause between two attempts: from `RETRY_MIN` to `RETRY_MAX`.
const RETRY_MIN: Duration = Duration::from_millis(2);
const RETRY_MAX: Duration = Duration::from_millis(20);

/// What is left of a lease after `elapsed` was spent acquiring it, less the
/// drift; `None` when nothing is (the majority came too late to be used).
pub fn validity(lease: Duration, elapsed: Duration) -> Option<Duration> {
    lease
        .checked_sub(elapsed)
        .and_then(|left| left.checked_sub(drift(lease)))
        .filter(|left| !left.is_zero())
}

/// One Redlock node: a connection made on demand and dropped on the first
/// error, so that a dead node costs one refused connect (immediate on
/// loopback) rather than a reconnecting client's retries and back-off.
struct Node {
    client: redis::Client,
    conn: std::sync::Mutex<Option<MultiplexedConnection>>,
}

impl Node {
    async fn conn(&self, timeout: Duration) -> Result<Conn, StoreError> {
        if let Some(conn) = self.conn.lock().ok().and_then(|c| c.clone()) {
            return Ok(Conn::Plain(conn));
        }
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout));
        let conn = self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        if let Ok(mut slot) = self.conn.lock() {
            *slot = Some(conn.clone());
        }
        Ok(Conn::Plain(conn))
    }

    /// Forgets the connection after a failure: the next command reconnects.
    fn broken(&self) {
        if let Ok(mut slot) = self.conn.lock() {
            *slot = None;
        }
    }
}

/// The independent Redis servers of one deployment (`--redlock-nodes`).
/// Cheap to clone; connections are made on first use.
#[derive(Clone)]
pub struct RedlockNodes {
    nodes: std::sync::Arc<[Node]>,
    node_timeout: Duration,
}

impl RedlockNodes {
    /// Handles on `urls`; nothing is connected yet.
    pub fn open(urls: &[String]) -> Result<Self, StoreError> {
        let nodes = urls
            .iter()
            .map(|url| {
                Ok(Node {
                    client: redis::Client::open(url.as_str())?,
                    conn: std::sync::Mutex::new(None),
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
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

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// How many nodes make a majority.
    pub fn quorum(&self) -> usize {
        self.nodes.len() / 2 + 1
    }

    /// The lock on `key`, on every node.
    pub fn lock(&self, key: impl Into<String>) -> Redlock {
        Redlock {
            nodes: self.clone(),
            key: key.into(),
            announce: None,
        }
    }
}

/// One node's answer to one command.
enum Vote {
    Yes,
    No,
    /// No answer within the node timeout, or an error: the node is down to us.
    Down,
}

/// One round of `SET NX PX` on every node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Round {
    /// When the round's requests were sent.
    pub sent: Instant,
    /// Nodes that granted the lock.
    pub granted: usize,
    /// Nodes that answered at all (granted or refused).
    pub answered: usize,
    /// Time from the first request to the last answer (or timeout).
    pub elapsed: Duration,
    /// What is left of the lease when a majority granted it in time.
    pub validity: Option<Duration>,
}

/// Why [`Redlock::lock`] gave up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Enough nodes answered, but others hold the lock.
    Held,
    /// Fewer than a majority of the nodes answered at all: nobody can hold
    /// this lock until they come back.
    NoQuorum { answered: usize, quorum: usize },
}

/// The lock on one key across all nodes. Cheap to clone.
#[derive(Clone)]
pub struct Redlock {
    nodes: RedlockNodes,
    key: String,
    /// Where releases are announced and waiters woken (the main Redis and
    /// this process's listener); without it waiters only retry after a
    /// random pause.
    announce: Option<(Conn, Wakeups)>,
}

impl Redlock {
    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn quorum(&self) -> usize {
        self.nodes.quorum()
    }

    /// Announces releases on `conn` (PUBLISH on the lock's release channel)
    /// and waits for them with `wakeups`, so that a waiter tries again when
    /// the lock is released instead of every few milliseconds: with many
    /// waiters, rounds that split the votes and win nothing become rare.
    pub fn with_wakeups(mut self, conn: Conn, wakeups: Wakeups) -> Self {
        self.announce = Some((conn, wakeups));
        self
    }

    /// Runs `op` on every node at once, each bounded by the node timeout:
    /// its answer, or `None` for a node that failed or did not answer in
    /// time (its connection is dropped; the next command reconnects).
    async fn ask_every_node<T, F, Fut>(&self, op: F) -> Vec<Option<T>>
    where
        F: Fn(Conn) -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        let timeout = self.nodes.node_timeout;
        join_all(self.nodes.nodes.iter().map(|node| {
            let op = &op;
            async move {
                let ask = async { op(node.conn(timeout).await?).await };
                match tokio::time::timeout(timeout, ask).await {
                    Ok(Ok(answer)) => Some(answer),
                    Ok(Err(_)) | Err(_) => {
                        node.broken();
                        None
                    }
                }
            }
        }))
        .await
    }

    /// [`Redlock::ask_every_node`] with the node's lease lock on this key:
    /// a yes, a no, or no answer from each node.
    async fn on_every_node<F, Fut>(&self, op: F) -> Vec<Vote>
    where
        F: Fn(LeaseLock) -> Fut,
        Fut: std::future::Future<Output = Result<bool, StoreError>>,
    {
        self.ask_every_node(|conn| {
            // Node locks are never waited on: no wakeups needed.
            op(LeaseLock::new(conn, self.key.clone(), Wakeups::new()))
        })
        .await
        .into_iter()
        .map(|answer| match answer {
            Some(true) => Vote::Yes,
            Some(false) => Vote::No,
            None => Vote::Down,
        })
        .collect()
    }

    /// One attempt: `SET NX PX` on every node at once. Does not undo a
    /// failed round; [`Redlock::lock`] does.
    pub async fn try_round(&self, owner: &OwnerId, lease: Duration) -> Round {
        let started = Instant::now();
        let votes = self
            .on_every_node(|lock| async move { lock.try_lock(owner, lease).await })
            .await;
        let elapsed = started.elapsed();
        let granted = votes.iter().filter(|v| matches!(v, Vote::Yes)).count();
        let answered = votes.iter().filter(|v| !matches!(v, Vote::Down)).count();
        Round {
            sent: started,
            granted,
            answered,
            elapsed,
            validity: (granted >= self.quorum())
                .then(|| validity(lease, elapsed))
                .flatten(),
        }
    }

    /// Takes the lock for `owner`, trying for up to `wait` (zero: one
    /// round). `Ok(Ok(grant))`: held until [`Grant::deadline`] unless
    /// renewed, which is the round's send + the lease − the drift: the
    /// validity counted from the moment the round was sent.
    pub async fn lock(
        &self,
        owner: &OwnerId,
        lease: Duration,
        wait: Duration,
    ) -> Result<Result<Grant, Refused>, StoreError> {
        let wakeups = match &self.announce {
            Some((_, wakeups)) => wakeups.clone(),
            None => Wakeups::new(),
        };
        let last = std::sync::Mutex::new(None);
        let acquired = wait_for_lock(&wakeups, &self.key, wait, || async {
            let round = self.try_round(owner, lease).await;
            if let Ok(mut last) = last.lock() {
                *last = Some(round);
            }
            if round.validity.is_some() {
                return Ok(Attempt::Acquired(Grant {
                    sent: round.sent,
                    lease,
                    holds: 1,
                    token: None,
                }));
            }
            // Undo whatever this round got, on every node (a node that
            // timed out may still have set it).
            self.unlock_nodes(owner).await;
            // Held by a majority elsewhere: woken by its release, or try
            // again after a longer pause; votes split with nobody holding a
            // majority: try again soon.
            let pause =
                if round.answered - round.granted >= self.quorum() && self.announce.is_some() {
                    RETRY_MAX * 5 + jitter()
                } else {
                    jitter()
                };
            Ok(Attempt::HeldFor(Some(pause)))
        })
        .await?;
        if let Some(grant) = acquired {
            return Ok(Ok(grant));
        }
        let round = last.lock().ok().and_then(|last| *last).unwrap_or(Round {
            sent: Instant::now(),
            granted: 0,
            answered: 0,
            elapsed: Duration::ZERO,
            validity: None,
        });
        Ok(Err(if round.answered < self.quorum() {
            Refused::NoQuorum {
                answered: round.answered,
                quorum: self.quorum(),
            }
        } else {
            Refused::Held
        }))
    }

    /// Releases the lock on every node that `owner` holds it on, announces
    /// the release, and returns on how many nodes it still held it.
    pub async fn unlock(&self, owner: &OwnerId) -> usize {
        let released = self.unlock_nodes(owner).await;
        if let Some((conn, _)) = &self.announce {
            // The message is the lock's key: the listener wakes that lock's waiter.
            let _: Result<i64, _> = redis::cmd("PUBLISH")
                .arg(release_channel(&self.key))
                .arg(&self.key)
                .query_async(&mut conn.clone())
                .await;
        }
        released
    }

    async fn unlock_nodes(&self, owner: &OwnerId) -> usize {
        self.on_every_node(|lock| async move { lock.unlock(owner).await })
            .await
            .iter()
            .filter(|v| matches!(v, Vote::Yes))
            .count()
    }
}

/// Who holds a Redlock right now, as the nodes say (for the dashboard).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holding {
    /// The owner most nodes name, and on how many nodes.
    pub owner: Option<(String, usize)>,
    /// The shortest lease left among that owner's nodes.
    pub ttl: Option<Duration>,
    /// Nodes that answered.
    pub answered: usize,
}

impl Redlock {
    /// Asks every node who holds the lock (GET and PTTL, node timeout each).
    pub async fn holding(&self) -> Holding {
        let answers = self
            .ask_every_node(|mut conn| async move {
                let (owner, pttl): (Option<String>, i64) = redis::pipe()
                    .get(&self.key)
                    .pttl(&self.key)
                    .query_async(&mut conn)
                    .await?;
                Ok((owner, pttl))
            })
            .await;
        let answered = answers.iter().flatten().count();
        let mut counts: std::collections::BTreeMap<String, (usize, i64)> = Default::default();
        for (owner, pttl) in answers.into_iter().flatten() {
            if let Some(owner) = owner {
                let entry = counts.entry(owner).or_insert((0, i64::MAX));
                entry.0 += 1;
                entry.1 = entry.1.min(pttl);
            }
        }
        let top = counts.into_iter().max_by_key(|(_, (n, _))| *n);
        Holding {
            ttl: top
                .as_ref()
                .and_then(|(_, (_, pttl))| u64::try_from(*pttl).ok())
                .map(Duration::from_millis),
            owner: top.map(|(owner, (n, _))| (owner, n)),
            answered,
        }
    }
}

impl Lease for Redlock {
    /// Extends the lease on every node; kept when a majority extended it
    /// while some of the lease is left.
    async fn renew(&self, owner: &OwnerId, lease: Duration) -> Result<bool, StoreError> {
        let started = Instant::now();
        let extended = self
            .on_every_node(|lock| async move { lock.renew(owner, lease).await })
            .await
            .iter()
            .filter(|v| matches!(v, Vote::Yes))
            .count();
        Ok(extended >= self.quorum() && validity(lease, started.elapsed()).is_some())
    }
}

/// A random pause from `RETRY_MIN` to `RETRY_MAX`.
fn jitter() -> Duration {
    let span = (RETRY_MAX - RETRY_MIN).as_micros();
    let random = uuid::Uuid::new_v4().as_u128();
    RETRY_MIN + Duration::from_micros((random % span.max(1)) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validity_shrinks_with_the_time_spent_acquiring() {
        let lease = Duration::from_secs(10);
        let fast = validity(lease, Duration::from_millis(5)).unwrap();
        let slow = validity(lease, Duration::from_millis(500)).unwrap();
        assert_eq!(fast, lease - Duration::from_millis(5) - drift(lease));
        assert_eq!(fast - slow, Duration::from_millis(495));
        // Too late to be of use: no validity at all.
        assert_eq!(validity(lease, lease), None);
        assert_eq!(validity(lease, lease - drift(lease)), None);
        assert_eq!(validity(Duration::from_millis(1), Duration::ZERO), None);
    }

    #[test]
    fn jitter_stays_in_its_range() {
        for _ in 0..1000 {
            let pause = jitter();
            assert!((RETRY_MIN..RETRY_MAX).contains(&pause), "{pause:?}");
        }
    }

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
