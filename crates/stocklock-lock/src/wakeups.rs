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

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::{Client, PushInfo, PushKind, Value};
use tokio::sync::{Notify, broadcast, watch};
use tokio::time::Instant;

use super::hook::{Hook, Point};
use super::per_key::{InUse, PerKey};
use crate::Error;
use crate::store::{Store, manager_config};

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

    fn on_push(&self, push: PushInfo) {
        match push.kind {
            // data: [pattern, channel, message]; the channel names the lock,
            // the message is the lock key or the releasing process.
            PushKind::PMessage => {
                if let [_, Value::BulkString(channel), Value::BulkString(message)] = &push.data[..]
                    && message.as_slice() != self.origin.as_bytes()
                    && let Some(key) = channel.strip_prefix(PREFIX.as_bytes())
                {
                    self.released(&String::from_utf8_lossy(key));
                }
            }
            // data: [channel, message]
            PushKind::Message => {
                if let [Value::BulkString(channel), Value::BulkString(message)] = &push.data[..] {
                    let _ = self.heard.send(Heard::Message {
                        channel: String::from_utf8_lossy(channel).into_owned(),
                        message: String::from_utf8_lossy(message).into_owned(),
                    });
                }
            }
            PushKind::Disconnection => {
                self.wake_all();
                let _ = self.heard.send(Heard::Lost);
            }
            _ => {}
        }
    }

    /// Keeps this process subscribed to every release channel while the returned task runs.
    /// Survives Redis being away, at start-up or later: it re-subscribes after a reconnect, and
    /// a heartbeat PING notices a dead socket.
    pub fn listen(&self, client: Client) -> tokio::task::JoinHandle<()> {
        let wakeups = self.clone();
        tokio::spawn(async move {
            let mut conn = loop {
                match subscribe(client.clone(), wakeups.listener_config(), &wakeups.channels).await
                {
                    Ok(conn) => break conn,
                    Err(err) => {
                        tracing::debug!(%err, "release listener not subscribed yet; retrying");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
            };
            tracing::debug!("release listener subscribed");
            wakeups.set_listener_conn(Some(conn.clone()));
            wakeups.subscribed.send_replace(true);
            let mut heartbeat = tokio::time::interval(Duration::from_secs(1));
            loop {
                heartbeat.tick().await;
                let _: Result<String, _> = redis::cmd("PING").query_async(&mut conn).await;
            }
        })
    }

    /// [`listen`](Self::listen) on `store`'s server, or on a Sentinel store's master, followed:
    /// when the heartbeat finds it gone, waiters re-check, listeners hear [`Heard::Lost`], and
    /// it subscribes again on whichever server the Sentinels name master next.
    pub fn follow(&self, store: Store) -> tokio::task::JoinHandle<()> {
        if !store.is_sentinel() {
            return self.listen(store.client().clone());
        }
        let wakeups = self.clone();
        tokio::spawn(async move {
            loop {
                let subscribed = match store.master_client().await {
                    Ok(client) => {
                        subscribe(client, wakeups.listener_config(), &wakeups.channels).await
                    }
                    Err(err) => Err(err),
                };
                let mut conn = match subscribed {
                    Ok(conn) => conn,
                    Err(err) => {
                        tracing::debug!(%err, "release listener has no master yet; retrying");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                };
                tracing::debug!("release listener subscribed on the master");
                wakeups.set_listener_conn(Some(conn.clone()));
                wakeups.subscribed.send_replace(true);
                let mut heartbeat = tokio::time::interval(Duration::from_millis(250));
                loop {
                    heartbeat.tick().await;
                    let ping: Result<String, _> = redis::cmd("PING").query_async(&mut conn).await;
                    if ping.is_err() {
                        break;
                    }
                }
                tracing::warn!("release listener lost the master; asking the Sentinels again");
                wakeups.set_listener_conn(None);
                wakeups.wake_all();
                let _ = wakeups.heard.send(Heard::Lost);
            }
        })
    }

    /// The listener's connection settings: pushes come here; a reconnection subscribes again.
    fn listener_config(&self) -> redis::aio::ConnectionManagerConfig {
        let sink = self.clone();
        manager_config()
            .set_push_sender(move |push: PushInfo| -> Result<(), ()> {
                sink.on_push(push);
                Ok(())
            })
            .set_automatic_resubscription()
    }
}

async fn subscribe(
    client: Client,
    config: redis::aio::ConnectionManagerConfig,
    channels: &[String],
) -> Result<ConnectionManager, Error> {
    let mut conn = ConnectionManager::new_with_config(client, config).await?;
    conn.psubscribe(format!("{PREFIX}*")).await?;
    for channel in channels {
        conn.subscribe(channel).await?;
    }
    Ok(conn)
}

/// One try at a lock, for [`wait_for_lock`]: ours now, or someone else's for a while yet.
///
/// ```
/// use stocklock_lock::{Hook, wakeups::{Attempt, Wakeups, wait_for_lock}};
/// # #[tokio::main] async fn main() -> Result<(), stocklock_lock::Error> {
/// let held = || async { Ok(Attempt::<()>::HeldFor(None)) }; // held, with no expiry
/// let once = std::time::Duration::ZERO; // no wait: one try
/// assert_eq!(wait_for_lock(&Wakeups::new(), "lock:{a}", once, &Hook::none(), held).await?, None);
/// # Ok(()) }
/// ```
pub enum Attempt<T> {
    /// The lock is ours.
    Acquired(T),
    /// Someone holds it; its lease has this long left (`None`: no expiry).
    HeldFor(Option<Duration>),
}

/// Where a taker stops each time it finds the lock held, before sleeping until a release or the
/// lease's end: a hook notes that the step waits for a lock (not for it), or holds the wait.
pub const WAITS: Point = Point::new("waits");

/// Tries `attempt` until it succeeds (`Some`) or `wait` runs out (`None`), sleeping between
/// tries until a release of `lock_key` is announced or the holder's TTL is over, whichever
/// comes first. Before each sleep the taker reaches [`WAITS`] of `hook`.
pub async fn wait_for_lock<T, F, Fut>(
    wakeups: &Wakeups,
    lock_key: &str,
    wait: Duration,
    hook: &Hook,
    mut attempt: F,
) -> Result<Option<T>, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Attempt<T>, Error>>,
{
    let deadline = Instant::now() + wait;
    let waiting = wakeups.notifier(lock_key);
    let notify: &Notify = &waiting;
    loop {
        // Register as a waiter before trying, so a release between the try
        // and the sleep is not missed.
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();

        let ttl = match attempt().await? {
            Attempt::Acquired(value) => return Ok(Some(value)),
            Attempt::HeldFor(ttl) => ttl,
        };
        let now = Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        // Re-check no later than when the holder's lease runs out.
        let recheck = match ttl {
            Some(ttl) => deadline.min(now + ttl.max(Duration::from_millis(1))),
            None => deadline,
        };
        hook.at(WAITS).await;
        tokio::select! {
            _ = &mut notified => {}
            _ = tokio::time::sleep_until(recheck) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_locks_notifier_goes_with_its_last_waiter() {
        let wakeups = Wakeups::new();
        for key in 0..1000 {
            let got = wait_for_lock(
                &wakeups,
                &format!("lock:{{{key}}}"),
                Duration::ZERO,
                &Hook::none(),
                || async { Ok::<_, Error>(Attempt::Acquired(())) },
            )
            .await
            .unwrap();
            assert_eq!(got, Some(()));
        }
        assert_eq!(
            wakeups.waited_on(),
            0,
            "ever new locks leave nothing behind"
        );

        // Two waiters of one lock: the entry stays until both are gone, and a
        // release wakes the one still waiting.
        let first = wakeups.notifier("lock:{x}");
        let waiter = {
            let wakeups = wakeups.clone();
            tokio::spawn(async move {
                let mut tries = 0;
                wait_for_lock(
                    &wakeups,
                    "lock:{x}",
                    Duration::from_secs(5),
                    &Hook::none(),
                    || {
                        tries += 1;
                        let acquired = tries > 1;
                        async move {
                            Ok::<_, Error>(if acquired {
                                Attempt::Acquired(())
                            } else {
                                Attempt::HeldFor(Some(Duration::from_secs(5)))
                            })
                        }
                    },
                )
                .await
            })
        };
        // The waiter holds the entry (with `first`) until woken.
        while Arc::strong_count(first.shared()) < 3 {
            tokio::task::yield_now().await;
        }
        drop(first);
        assert_eq!(wakeups.waited_on(), 1);
        wakeups.released("lock:{x}");
        let woken = tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("the release woke the waiter")
            .unwrap()
            .unwrap();
        assert_eq!(woken, Some(()));
        assert_eq!(wakeups.waited_on(), 0);
    }
}
