//! The worker: every instance runs one, a consumer of the `workers` group
//! on each SKU's order stream. It inserts a batch of orders in one
//! transaction and `XACK`s the messages only after the commit (deleting
//! them with the ack: the stream holds only the backlog), so:
//!
//! - a worker that dies between its commit and its ack leaves the messages
//!   pending; they are delivered again (to itself after a restart: it reads
//!   its own pending entries first; to a live worker, which claims them
//!   with `XAUTOCLAIM` once they have been idle for `claim_idle`), and the
//!   second insert finds the order of its own sale and inserts nothing;
//! - an insert that meets another order (its sale taken by another unit or
//!   request id, its unit live in another order, its request id used) is
//!   refused, never dropped: its message stays pending and is retried at
//!   every claim, each refusal logged and counted in the SKU's ledger
//!   (`order_conflicts`, which reconcile shows), while the rest of its
//!   batch is written and acked;
//! - PostgreSQL down: the batch is not acked and is tried again until it
//!   commits, while new messages wait in the stream; buyers' answers never
//!   wait for any of this.
//!
//! Chaos mode's `worker_crash_before_ack` aborts the process right after a
//! commit, before its ack.
mod process;
mod streams;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use redis::aio::ConnectionLike;
use redis::streams::StreamId;

use super::OrdersConfig;
use super::insert::Orders;
use super::message::GROUP;
use crate::chaos::Chaos;
use crate::store::{Conn, Keys, Store, StoreError};

/// Messages read at once.
const BATCH: usize = 256;
/// How long a read waits for new messages before the worker looks at its
/// registry and its pending entries again.
const BLOCK: Duration = Duration::from_millis(200);
/// How long the worker waits before trying again after a failure.
const BACKOFF: Duration = Duration::from_millis(250);

/// Runs the worker of instance `consumer` until the process ends.
pub async fn run(store: Store, config: OrdersConfig, consumer: String, chaos: Chaos) {
    let mut worker = Worker {
        store,
        config,
        consumer,
        chaos,
        skus: BTreeSet::new(),
        looked: None,
        claimed: None,
        own_pending: true,
        refused: BTreeSet::new(),
    };
    loop {
        if let Err(err) = worker.serve().await {
            tracing::warn!("order worker: {err:#}; trying again");
            // Whatever it held when it failed is read again from its pending entries.
            worker.own_pending = true;
            tokio::time::sleep(BACKOFF).await;
        }
    }
}

struct Worker {
    store: Store,
    config: OrdersConfig,
    consumer: String,
    chaos: Chaos,
    /// The SKUs whose streams it reads, and when it last asked the registry.
    skus: BTreeSet<String>,
    looked: Option<Instant>,
    /// When it last claimed the idle entries of dead consumers.
    claimed: Option<Instant>,
    /// Whether it must read its own pending entries before new ones.
    own_pending: bool,
    /// The entries whose insert was refused (they stay pending): reading
    /// its own pending entries is done once only these come back.
    refused: BTreeSet<String>,
}

impl Worker {
    /// Connects and works until something fails.
    async fn serve(&mut self) -> anyhow::Result<()> {
        let mut db = Orders::prepare(super::connect(&self.config.postgres_url).await?).await?;
        let mut conn = self.store.conn().await?;
        // Blocking reads on a connection of their own: a blocked read
        // would hold up every command pipelined behind it.
        let mut reader: Option<Conn> = None;
        loop {
            if let Some(gates) = crate::gate::Gates::of(&self.chaos, &self.store)
                && crate::gate::workers::wait_while_held(&gates, &self.consumer).await?
            {
                // A scheduled turn starts from a fresh look at the streams
                // (their groups made again, after a reset): what it reads
                // depends on the schedule alone, not on when it last looked.
                self.looked = None;
            }
            self.look_for_streams(&mut conn).await?;
            if self.skus.is_empty() {
                tokio::time::sleep(BLOCK).await;
                continue;
            }
            let claim_due = self
                .claimed
                .is_none_or(|at| at.elapsed() >= self.config.claim_idle / 2);
            if claim_due {
                self.claimed = Some(Instant::now());
                for sku in self.skus.clone() {
                    let entries = self.claim_idle(&mut conn, &sku).await?;
                    self.process(&mut conn, &mut db, &sku, entries).await?;
                }
            }
            let own = self.own_pending;
            let batches = if own || self.store.is_cluster() {
                self.read(&mut conn, own, None).await?
            } else {
                if reader.is_none() {
                    let client = self.store.master_client().await?;
                    reader = Some(Conn::Plain(
                        client.get_multiplexed_async_connection().await?,
                    ));
                }
                let read = match reader.as_mut() {
                    Some(reader) => self.read(reader, false, Some(BLOCK)).await,
                    None => Ok(Vec::new()),
                };
                if read.is_err() {
                    reader = None;
                }
                read?
            };
            let only_refused = |entries: &Vec<StreamId>| {
                entries.iter().all(|entry| self.refused.contains(&entry.id))
            };
            if own && batches.iter().all(|(_, entries)| only_refused(entries)) {
                self.own_pending = false;
            }
            if self.store.is_cluster() && !own && batches.iter().all(|(_, e)| e.is_empty()) {
                tokio::time::sleep(BLOCK).await;
            }
            for (sku, entries) in batches {
                self.process(&mut conn, &mut db, &sku, entries).await?;
            }
        }
    }
}

/// Whether Redis said the stream or its group is gone (a reset deleted
/// them): `NOGROUP`, or `UNBLOCKED` for a read blocked on it.
fn stream_gone(err: &redis::RedisError) -> bool {
    let text = err.to_string();
    text.contains("NOGROUP") || text.contains("UNBLOCKED")
}

/// Creates the workers' group on a SKU's stream (and the stream), reading
/// from its start; nothing if it exists.
pub async fn ensure_group<C: ConnectionLike>(conn: &mut C, keys: &Keys) -> Result<(), StoreError> {
    let created: Result<String, redis::RedisError> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(&keys.orders)
        .arg(GROUP)
        .arg("0")
        .arg("MKSTREAM")
        .query_async(conn)
        .await;
    match created {
        Ok(_) => Ok(()),
        Err(err) if err.code() == Some("BUSYGROUP") => Ok(()),
        Err(err) => Err(err.into()),
    }
}
