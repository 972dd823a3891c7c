//! The listener: one connection subscribed to every release channel (and the channels a
//! process also hears), kept subscribed across reconnects and, on a Sentinel store, failovers.

use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::{Client, PushInfo, PushKind, Value};

use super::{Heard, PREFIX, Wakeups};
use crate::Error;
use crate::store::{Store, manager_config};

impl Wakeups {
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
