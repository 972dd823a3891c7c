//! A lock that lives in etcd or in ZooKeeper, as the explorer sees it: its
//! queue of contenders (whose first holds it), and the end of one
//! contender's lease or session, which the explorer brings about where the
//! model lets time pass (a crashed or frozen buyer's keep-alives stop, a
//! working holder's come late).
//!
//! The buyers' own processes live on meanwhile, their keep-alives or pings
//! flowing: the explorer ends the lease or the session as the store sees
//! it. etcd's lease is revoked, its key deleted with it, and the holder's
//! next keep-alive finds it gone, as a lease that ran out. ZooKeeper's
//! session cannot be ended from another client without its password: the
//! contender's ephemeral znode is deleted, which is all the other
//! contenders and the store see of a session's end (the holder's client,
//! still connected, does not learn it; its write meets the fence as a
//! frozen holder's does).

use std::collections::HashSet;

use anyhow::Context;

use crate::harness::stack::Stack;
use crate::lock::etcd::{EtcdClient, EtcdLock};
use crate::lock::zookeeper::{ZooKeeperLock, ZooKeeperSession, lock_name};
use crate::store::Keys;
use crate::variants::Variant;

/// The lock store of an etcd or ZooKeeper variant's lock.
pub(in crate::explore) enum Elsewhere {
    Etcd(EtcdLock),
    /// The lock through a session of the explorer's own, kept open.
    ZooKeeper {
        lock: ZooKeeperLock,
        _session: Box<ZooKeeperSession>,
    },
}

impl Elsewhere {
    /// The lock of `variant` for `keys` on `stack`'s etcd or ZooKeeper;
    /// `None` for a variant whose lock is elsewhere (Redis, none).
    pub(in crate::explore) async fn of(
        stack: &Stack,
        variant: Variant,
        keys: &Keys,
    ) -> anyhow::Result<Option<Elsewhere>> {
        let missing = |store: &str| {
            format!("{variant} is explored on a stack of the explorer's own, whose {store} it sees")
        };
        match variant {
            Variant::Etcd => {
                anyhow::ensure!(!stack.etcd_members.is_empty(), missing("etcd members"));
                let urls = stack.etcd_members.iter().map(|m| m.url.clone()).collect();
                let client = EtcdClient::new(urls)?;
                Ok(Some(Elsewhere::Etcd(EtcdLock::new(client, &keys.lock))))
            }
            Variant::ZooKeeper => {
                anyhow::ensure!(!stack.zookeeper.is_empty(), missing("ZooKeeper servers"));
                let servers: Vec<&str> = stack.zookeeper.iter().map(|s| s.url.as_str()).collect();
                let second = std::time::Duration::from_secs(1);
                let session =
                    ZooKeeperSession::connect(&servers.join(","), 10 * second, 5 * second)
                        .await
                        .context("connecting to ZooKeeper")?;
                let lock = session.lock(&lock_name(&keys.lock))?;
                Ok(Some(Elsewhere::ZooKeeper {
                    lock,
                    _session: Box::new(session),
                }))
            }
            _ => Ok(None),
        }
    }

    /// The contenders queued now, the holder first: etcd's keys, or
    /// ZooKeeper's znodes.
    pub(in crate::explore) async fn queue(&self) -> anyhow::Result<Vec<String>> {
        Ok(match self {
            Elsewhere::Etcd(lock) => (lock.contenders_in_order().await?)
                .into_iter()
                .map(|holder| holder.key)
                .collect(),
            Elsewhere::ZooKeeper { lock, .. } => lock.contenders_in_order().await?,
        })
    }

    /// Ends `entry`'s lease (etcd: its key goes with it) or, as the store
    /// sees it, its session (ZooKeeper: its znode is deleted). An entry
    /// already gone is no error.
    pub(in crate::explore) async fn end(&self, entry: &str) -> anyhow::Result<()> {
        match self {
            Elsewhere::Etcd(lock) => {
                // `<prefix>/<lease id in hex>`.
                let hex = entry.rsplit('/').next().unwrap_or_default();
                let lease = u64::from_str_radix(hex, 16)
                    .with_context(|| format!("the lease of etcd key {entry:?}"))?;
                lock.end_lease(lease as i64).await?;
            }
            Elsewhere::ZooKeeper { lock, .. } => {
                lock.evict(entry).await?;
            }
        }
        Ok(())
    }
}

impl super::Run<'_> {
    /// Buyer `n`'s entry in an etcd or ZooKeeper lock's queue: the one it
    /// just made, which no other buyer made (one buyer moves at a time:
    /// the newest of those nobody owns).
    pub(in crate::explore) async fn learn_entry(&mut self, n: u8) -> anyhow::Result<()> {
        let Some(elsewhere) = &self.elsewhere else {
            return Ok(());
        };
        let queue = elsewhere.queue().await?;
        let known: HashSet<&String> = self.entries.values().collect();
        if let Some(entry) = queue.iter().rev().find(|e| !known.contains(e)) {
            self.entries.insert(n, entry.clone());
        }
        Ok(())
    }

    /// Ends the leases (etcd) or, as the store sees them, the sessions
    /// (ZooKeeper) of `buyers`' entries: they leave the queue, and those
    /// after them go on.
    pub(in crate::explore) async fn end_entries(&mut self, buyers: &[u8]) -> anyhow::Result<()> {
        let Some(elsewhere) = &self.elsewhere else {
            return Ok(());
        };
        for n in buyers {
            if let Some(entry) = self.entries.remove(n) {
                elsewhere.end(&entry).await?;
            }
            self.holders.remove(n);
        }
        Ok(())
    }
}
