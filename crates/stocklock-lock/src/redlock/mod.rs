//! Redlock: one lease lock taken on a majority of N independent Redis servers.
//!
//! Article 000's last answer to "what if the one Redis fails". The owner
//! sends `SET key token NX PX lease` to every node at once, each with a
//! short timeout, and holds the lock when a majority said yes *and* some of
//! the lease is left: validity = lease − time spent acquiring − clock drift.
//! Otherwise it releases whatever it got on every node and tries again: when
//! a majority named another holder, at its release or when its lease runs
//! out on its nodes (as a lease lock on one Redis waits); when the votes
//! split, after a random delay, so that competing owners do not keep
//! splitting them.
//! A release (and a renewal) goes to every node too.
//!
//! It survives a minority of nodes being down. What it does not survive is
//! what no timing-based lock survives: a holder that freezes past its
//! validity wakes up and writes (Kleppmann's pause), and a node that
//! restarts without persistence forgets a lock it granted, handing a second
//! owner its majority. A fencing token (`fenced`) or no lock at all (`lua`)
//! do not depend on timing; this lock does.

mod holding;
mod nodes;

use std::time::{Duration, Instant};

pub use self::holding::Holding;
pub use self::nodes::{NODE_TIMEOUT, RedlockNodes};
use super::wakeups::{Attempt, release_channel, wait_for_lock};
use super::{Grant, Hook, Lease, LeaseLock, OwnerId, Wakeups, drift};
use crate::Error;
use crate::store::Conn;

/// Where a hooked round holds its question to node K (`vote:K`).
pub const VOTE: &str = "vote";
/// Where a hooked round's question to node K has its answer, a yes, a no
/// or none (`voted:K`): a scheduler learns the vote is in, and a gate only
/// notes it.
pub const VOTED: &str = "voted";

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

/// One node's answer to one command.
enum Vote {
    Yes,
    No,
    /// No answer within the node timeout, or an error: the node is down to us.
    Down,
}

/// One round of `SET NX PX` on every node ([`Redlock::try_round`]).
///
/// ```
/// use std::time::{Duration, Instant};
/// use stocklock_lock::{Round, redlock::validity};
///
/// // 3 of 5 nodes granted a 10 s lease (a majority), 4 answered, all within 50 ms:
/// let (lease, elapsed) = (Duration::from_secs(10), Duration::from_millis(50));
/// let validity = validity(lease, elapsed); // as `Redlock::try_round` counts it
/// let round = Round { sent: Instant::now(), granted: 3, answered: 4, elapsed, validity };
/// // The lease less the time spent and the drift (1 % of it + 2 ms):
/// assert_eq!(round.validity, Some(Duration::from_millis(9_848)));
/// ```
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
///
/// ```
/// use stocklock_lock::Refused;
///
/// // An HTTP status for each: someone else holds it, or nobody can.
/// fn status(refused: Refused) -> u16 {
///     match refused {
///         Refused::Held => 409,
///         Refused::NoQuorum { .. } => 503,
///     }
/// }
/// assert_eq!(status(Refused::NoQuorum { answered: 2, quorum: 3 }), 503);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Enough nodes answered, but others hold the lock.
    Held,
    /// Fewer than a majority of the nodes answered at all: nobody can hold
    /// this lock until they come back.
    NoQuorum {
        /// How many nodes answered.
        answered: usize,
        /// How many make a majority.
        quorum: usize,
    },
}

/// The lock on one key across all nodes. Cheap to clone.
///
/// ```no_run
/// use stocklock_lock::store::Store;
/// use stocklock_lock::{LockOptions, RedlockNodes, Wakeups};
///
/// # async fn example(urls: Vec<String>) -> Result<(), stocklock_lock::Error> {
/// let store = Store::open("redis://127.0.0.1:6379")?; // where releases are announced
/// let wakeups = Wakeups::new();
/// let _listener = wakeups.listen(store.client().clone());
/// let lock = RedlockNodes::open(&urls)?.lock("lock:{order-42}");
/// let lock = lock.with_wakeups(store.conn().await?, wakeups); // waiters woken by releases
/// let guard = lock.acquire(&LockOptions::new()).await?; // or Error::Busy, Error::NoQuorum
/// guard.release().await?; // on every node
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Redlock {
    nodes: RedlockNodes,
    key: String,
    /// Where releases are announced and waiters woken (the main Redis and
    /// this process's listener); without it waiters only retry after a
    /// random pause.
    announce: Option<(Conn, Wakeups)>,
    /// Where a round's question to each node may be held (`vote:K`).
    hook: Hook,
}

impl Redlock {
    /// The key the lock is stored at on every node.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// How many nodes make a majority.
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

    /// Holds each node's question of a round at the hook's point `vote:K`
    /// first (a schedule's gate), outside the node's timeout; its answer
    /// reaches `voted:K`.
    pub fn with_hook(mut self, hook: Hook) -> Self {
        self.hook = hook;
        self
    }

    /// [`RedlockNodes::ask_every_node`] with the node's lease lock on this key:
    /// a yes, a no, or no answer from each node; a vote (`point`) held at
    /// the hook first.
    async fn on_every_node<F, Fut>(
        &self,
        points: Option<(&'static str, &'static str)>,
        op: F,
    ) -> Vec<Vote>
    where
        F: Fn(LeaseLock) -> Fut,
        Fut: std::future::Future<Output = Result<bool, Error>>,
    {
        let none = Hook::none();
        let (hook, points) = match points {
            Some(points) => (&self.hook, points),
            None => (&none, ("", "")),
        };
        self.nodes
            .ask_every_node_at(hook, points, |conn| {
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
            .on_every_node(Some((VOTE, VOTED)), |lock| async move {
                lock.try_lock(owner, lease).await
            })
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
    ) -> Result<Result<Grant, Refused>, Error> {
        let wakeups = match &self.announce {
            Some((_, wakeups)) => wakeups.clone(),
            None => Wakeups::new(),
        };
        let last = std::sync::Mutex::new(None);
        // Past it, a refused round is the last: no pause to compute.
        let deadline = Instant::now() + wait;
        let acquired = wait_for_lock(&wakeups, &self.key, wait, &self.hook, || async {
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
            // timed out may still have set it). Every node said no: none
            // holds it for us, nothing to undo.
            if round.granted > 0 || round.answered < self.nodes.len() {
                self.unlock_nodes(owner).await;
            }
            // Held by a majority elsewhere: woken by its release, or at the
            // latest when the holder's lease runs out on its nodes (as a
            // lease lock on one Redis waits); votes split with nobody
            // holding a majority: try again soon.
            let held = round.answered - round.granted >= self.quorum();
            let pause = match (&self.announce, held) {
                (Some(_), true) if Instant::now() < deadline => {
                    self.holding().await.ttl.unwrap_or_default() + jitter()
                }
                _ => jitter(),
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
        self.on_every_node(None, |lock| async move { lock.unlock(owner).await })
            .await
            .iter()
            .filter(|v| matches!(v, Vote::Yes))
            .count()
    }
}

impl Lease for Redlock {
    fn kind(&self) -> &'static str {
        "redlock"
    }

    /// Extends the lease on every node; kept when a majority extended it
    /// while some of the lease is left.
    async fn renew(&self, owner: &OwnerId, lease: Duration) -> Result<bool, Error> {
        let started = Instant::now();
        let extended = self
            .on_every_node(None, |lock| async move { lock.renew(owner, lease).await })
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
}
