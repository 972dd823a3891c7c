//! Waking lock waiters by pub/sub instead of polling.
//!
//! A release script publishes the lock's key on [`release_channel`]. Each
//! process keeps one RESP3 connection pattern-subscribed to every release
//! channel, and wakes one local waiter of that lock per message (Redisson's
//! way). Waking one rather than all keeps a release from turning into a
//! stampede of N acquire scripts of which N−1 fail.
//!
//! A release by this process wakes its own next waiter at once, without
//! waiting for its message to come back from Redis: the reentrant lock's
//! release names this process ([`Wakeups::origin`]) as the message, and the
//! listener skips messages of its own origin (the other processes still
//! wake one waiter each).
//!
//! Messages can be lost (the subscription reconnects, or the holder's lease
//! simply runs out and nobody publishes), so a waiter also re-checks after the
//! holder's remaining TTL: pub/sub makes the hand-off fast, the TTL bound
//! keeps it certain.
//!
//! The same connection carries the process's other announcements: channels
//! named with [`Wakeups::also_hearing`] are passed on to whoever listens
//! ([`Wakeups::heard`]), and [`Wakeups::publish`] sends on the server that
//! connection subscribes on, so that its answer counts every listener.

mod listener;
mod wait;

pub use wait::{Attempt, WAITS, wait_for_lock};

use std::sync::Arc;

use redis::aio::ConnectionManager;
use tokio::sync::{Notify, broadcast, watch};

use super::per_key::{InUse, PerKey};
use crate::Error;

/// Prefix of every release channel; the listener subscribes to `PREFIX*`.
const PREFIX: &str = "stocklock:released:";

/// The channel a release of `lock_key` is published on.
pub fn release_channel(lock_key: &str) -> String {
    format!("{PREFIX}{lock_key}")
}

/// The waiters of this process, by lock key. Cheap to clone.
///
/// ```no_run
/// # async fn example(store: stocklock_lock::store::Store) {
/// let wakeups = stocklock_lock::Wakeups::new(); // clones go to every lock of the process
/// let _listener = wakeups.follow(store); // one listener: a release wakes a waiter, no polling
/// # }
/// ```
#[derive(Clone)]
pub struct Wakeups {
    by_lock: Arc<PerKey<Notify>>,
    /// Turns true once the listener's first subscription is in place.
    subscribed: watch::Sender<bool>,
    /// Other channels the listener subscribes to, passed on as [`Heard`].
    channels: Arc<Vec<String>>,
    heard: broadcast::Sender<Heard>,
    /// The listener's connection, while subscribed: [`Wakeups::publish`].
    conn: Arc<std::sync::RwLock<Option<ConnectionManager>>>,
    /// This process's name in release messages.
    origin: Arc<str>,
}

/// What the listener passes on besides lock releases.
///
/// ```no_run
/// # async fn example(wakeups: stocklock_lock::Wakeups) {
/// let mut heard = wakeups.heard(); // of a `Wakeups` made with `also_hearing`
/// while let Ok(stocklock_lock::Heard::Message { channel, message }) = heard.recv().await {
///     println!("{channel}: {message}"); // until `Heard::Lost`: messages may have been missed
/// }
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Heard {
    /// A message on one of the channels named with [`Wakeups::also_hearing`].
    Message {
        /// The channel it came on.
        channel: String,
        /// What was published.
        message: String,
    },
    /// The subscription dropped, or a listener fell behind: messages may have been missed.
    Lost,
}

impl Default for Wakeups {
    fn default() -> Self {
        Self {
            by_lock: Arc::default(),
            subscribed: watch::Sender::new(false),
            channels: Arc::default(),
            heard: broadcast::Sender::new(1024),
            conn: Arc::default(),
            origin: uuid::Uuid::new_v4().simple().to_string().into(),
        }
    }
}

impl Wakeups {
    /// A set of waiters with no listener yet ([`Wakeups::listen`] starts one).
    pub fn new() -> Self {
        Self::default()
    }

    /// The same, also subscribing to `channels` (before it listens).
    pub fn also_hearing(mut self, channels: &[&str]) -> Self {
        self.channels = Arc::new(channels.iter().map(|c| (*c).to_owned()).collect());
        self
    }

    /// What this process's releases publish: its own listener skips them ([`Self::released`]).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Messages on the channels of [`Self::also_hearing`] from now on.
    pub fn heard(&self) -> broadcast::Receiver<Heard> {
        self.heard.subscribe()
    }

    /// Publishes `message` on `channel` over the listener's connection: how many subscribers of
    /// that server got it (every process's listener subscribes there: a cluster's first node).
    pub async fn publish(&self, channel: &str, message: &str) -> Result<i64, Error> {
        let Some(mut conn) = self.listener_conn() else {
            return Err(Error::Redis(redis::RedisError::from((
                redis::ErrorKind::Client,
                "the listener is not subscribed (yet, or since its master went away)",
            ))));
        };
        Ok(redis::cmd("PUBLISH")
            .arg(channel)
            .arg(message)
            .query_async(&mut conn)
            .await?)
    }

    fn listener_conn(&self) -> Option<ConnectionManager> {
        self.conn
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn set_listener_conn(&self, conn: Option<ConnectionManager>) {
        *self
            .conn
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = conn;
    }

    /// Whether [`listen`](Self::listen) has subscribed: until then no waiter hears a release.
    pub fn is_subscribed(&self) -> bool {
        *self.subscribed.borrow()
    }

    /// Resolves once [`listen`](Self::listen) has subscribed (at once if it has).
    pub async fn subscribed(&self) {
        let mut rx = self.subscribed.subscribe();
        let _ = rx.wait_for(|subscribed| *subscribed).await;
    }

    /// One waiter's notifier of `lock_key`: the entry lives while someone waits on that lock,
    /// not for the process's life, so ever new keys do not grow the map.
    fn notifier<'a>(&'a self, lock_key: &'a str) -> InUse<'a, Notify> {
        self.by_lock.use_key(lock_key)
    }

    /// How many locks have waiters right now (their notifiers).
    pub fn waited_on(&self) -> usize {
        self.by_lock.len()
    }

    /// A release of `lock_key` was heard, or made here (perhaps: its answer was lost): wake one.
    pub fn released(&self, lock_key: &str) {
        if let Some(notify) = self.by_lock.get(lock_key) {
            notify.notify_one();
        }
    }

    /// The subscription dropped: every waiter re-checks (messages may have been missed).
    fn wake_all(&self) {
        for notify in self.by_lock.all() {
            notify.notify_waiters();
        }
    }
}
