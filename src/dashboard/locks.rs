//! The lock state of the variants whose lock lives outside the main Redis
//! (Redlock's nodes, etcd, ZooKeeper), for their cards. A store that does
//! not answer within [`READ_WITHIN`] leaves the card as Redis shows it (no
//! lock there): the board never waits on a dead lock store.

use std::time::Duration;

use crate::lock::LockStores;
use crate::lock::etcd::EtcdLock;
use crate::store::Keys;
use crate::variants::Variant;
use crate::wire::LockState;

/// How long a card's lock may take to read.
const READ_WITHIN: Duration = Duration::from_millis(300);

/// The session timeout of the board's own ZooKeeper session.
const BOARD_SESSION: Duration = Duration::from_secs(10);

/// `variant`'s lock as its own store shows it; `None` when it lives on the
/// main Redis (read with the stock) or its store did not answer.
pub(super) async fn read(variant: Variant, keys: &Keys, stores: &LockStores) -> Option<LockState> {
    tokio::time::timeout(READ_WITHIN, read_unbounded(variant, keys, stores))
        .await
        .ok()
        .flatten()
}

async fn read_unbounded(variant: Variant, keys: &Keys, stores: &LockStores) -> Option<LockState> {
    match variant {
        Variant::Redlock => {
            let nodes = stores.redlock.as_ref()?;
            let holding = nodes.lock(keys.lock.clone()).holding().await;
            Some(LockState {
                held: holding.owner.is_some(),
                holder: holding
                    .owner
                    .map(|(owner, n)| format!("{owner} (on {n} of {} nodes)", nodes.len())),
                ttl_ms: holding.ttl.map(|ttl| ttl.as_millis() as i64),
                no_ttl: false,
            })
        }
        Variant::Etcd => {
            let client = stores.etcd.as_ref()?;
            let lock = EtcdLock::new(client.clone(), &keys.lock);
            let Some(holder) = lock.holder().await.ok()? else {
                return Some(LockState::default());
            };
            let queued = lock.contenders().await.unwrap_or(1);
            let ttl = lock.lease_left(holder.lease).await.ok().flatten();
            Some(LockState {
                held: true,
                holder: Some(format!(
                    "lease {:x}, revision {} ({queued} queued)",
                    holder.lease, holder.revision
                )),
                ttl_ms: ttl.map(|ttl| ttl.as_millis() as i64),
                no_ttl: false,
            })
        }
        Variant::ZooKeeper => {
            let session = stores
                .zookeeper
                .as_ref()?
                .session(BOARD_SESSION)
                .await
                .ok()?;
            let name = crate::lock::zookeeper::lock_name(&keys.lock);
            let holder = session.lock(&name).ok()?.holder().await.ok()?;
            Some(LockState {
                held: holder.is_some(),
                holder: holder.map(|path| format!("{path} (its session is the lease)")),
                ttl_ms: None,
                no_ttl: false,
            })
        }
        _ => None,
    }
}
