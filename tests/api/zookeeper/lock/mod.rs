//! The lock recipe on a real standalone server: exclusion between
//! sessions, growing tokens, a release waking the (one) waiter, a closed
//! session and an expired one freeing the lock.
//!
//! This file: the waits and the server's watches the tests share;
//! `exclusion.rs`: sessions excluding each other; `waiters.rs`: a release
//! waking the next waiter; `endings.rs`: a holder's session closed or
//! expired, and a server gone.

use std::time::Duration;

use stocklock::lock::ZooKeeperLock;
use zookeeper_client as zk;

use super::Servers;

mod endings;
mod exclusion;
mod waiters;

/// A session timeout no test outlives: a lock freed within a test was
/// freed by its release or its session's close, not by an expiry.
const LONG: Duration = Duration::from_secs(30);
/// How long a test waits for what should happen at once.
const PROMPT: Duration = Duration::from_secs(5);

/// Waits (with a watch, no polling) until the lock's directory has
/// `count` contenders' znodes.
async fn until_queued(servers: &Servers, lock: &ZooKeeperLock, count: usize) {
    let client = zk::Client::connect(&servers.connect_string())
        .await
        .unwrap();
    let wait = async {
        loop {
            match client.list_and_watch_children(lock.dir()).await {
                Ok((children, watcher)) => {
                    if children.len() >= count {
                        return;
                    }
                    watcher.changed().await;
                }
                // The directory does not exist yet: watch for it.
                Err(zk::Error::NoNode) => {
                    let (stat, watcher) = client.check_and_watch_stat(lock.dir()).await.unwrap();
                    if stat.is_none() {
                        watcher.changed().await;
                    }
                }
                Err(err) => panic!("zookeeper: {err}"),
            }
        }
    };
    tokio::time::timeout(PROMPT, wait)
        .await
        .unwrap_or_else(|_| panic!("{count} contenders were not queued within {PROMPT:?}"));
}

/// The watches the server holds, by path (`wchp`): path → watching sessions.
async fn watches(servers: &Servers) -> std::collections::BTreeMap<String, usize> {
    let answer = stocklock::up::zookeeper::four_letter_word(servers.servers[0].port(), "wchp")
        .await
        .unwrap();
    let mut watched = std::collections::BTreeMap::new();
    let mut path = None;
    for line in answer.lines() {
        if line.starts_with('/') {
            path = Some(line.to_owned());
        } else if line.trim_start().starts_with("0x")
            && let Some(path) = &path
        {
            *watched.entry(path.clone()).or_insert(0) += 1;
        }
    }
    watched
}
