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

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use redis::aio::ConnectionLike;
use redis::streams::{StreamAutoClaimReply, StreamId, StreamReadReply};

use super::OrdersConfig;
use super::insert::{Orders, is_conflict};
use super::message::{GROUP, OrderMessage, REGISTRY};
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

    /// Reads the registry (at most every `BLOCK`) and makes sure each new
    /// SKU's stream has the group (created at the stream's start: a group
    /// made after the first sales still reads them).
    async fn look_for_streams(&mut self, conn: &mut Conn) -> Result<(), StoreError> {
        if self.looked.is_some_and(|at| at.elapsed() < BLOCK) {
            return Ok(());
        }
        let forced = self.looked.is_none();
        self.looked = Some(Instant::now());
        let mut skus: BTreeSet<String> = redis::cmd("SMEMBERS")
            .arg(REGISTRY)
            .query_async(conn)
            .await?;
        // Nothing removes a SKU from the registry: one it lacks was lost
        // with Redis's data, and a `lua-stream` instance registers a SKU
        // again only now and then. Put back now, the sales made since the
        // loss are read at once instead of waiting on the stream.
        let forgotten: Vec<&String> = self.skus.difference(&skus).collect();
        if !forgotten.is_empty() {
            let _: i64 = redis::cmd("SADD")
                .arg(REGISTRY)
                .arg(&forgotten)
                .query_async(conn)
                .await?;
            tracing::warn!(
                ?forgotten,
                "order worker: SKUs put back in the lost registry"
            );
            skus.extend(self.skus.iter().cloned());
        }
        // The new SKUs' groups; every one's after a stream was found gone
        // (a reset deletes the stream with its group).
        for sku in skus.iter().filter(|s| forced || !self.skus.contains(*s)) {
            ensure_group(conn, &Keys::tagged_with(sku)).await?;
        }
        self.skus = skus;
        Ok(())
    }

    /// Reads the next entries of every stream: its own pending ones
    /// (`own`: delivered to it and never acked) or new ones, waiting up to
    /// `block` for some.
    async fn read(
        &mut self,
        conn: &mut Conn,
        own: bool,
        block: Option<Duration>,
    ) -> Result<Vec<(String, Vec<StreamId>)>, StoreError> {
        let start = if own { "0" } else { ">" };
        let groups: Vec<Vec<String>> = if self.store.is_cluster() {
            self.skus.iter().map(|sku| vec![sku.clone()]).collect()
        } else {
            vec![self.skus.iter().cloned().collect()]
        };
        let mut batches = Vec::new();
        for skus in groups {
            let mut cmd = redis::cmd("XREADGROUP");
            cmd.arg("GROUP").arg(GROUP).arg(&self.consumer);
            cmd.arg("COUNT").arg(BATCH);
            if let Some(block) = block {
                cmd.arg("BLOCK").arg(block.as_millis() as u64);
            }
            cmd.arg("STREAMS");
            for sku in &skus {
                cmd.arg(Keys::tagged_with(sku).orders);
            }
            for _ in &skus {
                cmd.arg(start);
            }
            let reply: Result<Option<StreamReadReply>, _> = cmd.query_async(conn).await;
            let reply = match reply {
                Ok(reply) => reply,
                // A stream reset away (with its group), under a blocked
                // read or before it: look again at once.
                Err(err) if stream_gone(&err) => {
                    self.looked = None;
                    continue;
                }
                Err(err) => return Err(err.into()),
            };
            for key in reply.map(|r| r.keys).unwrap_or_default() {
                if let Some(sku) = skus.iter().find(|s| Keys::tagged_with(s).orders == key.key) {
                    batches.push((sku.clone(), key.ids));
                }
            }
        }
        Ok(batches)
    }

    /// Takes over the entries of `sku`'s stream that another consumer was
    /// given and has not acked for `claim_idle` (it died, or is stuck).
    async fn claim_idle(
        &mut self,
        conn: &mut Conn,
        sku: &str,
    ) -> Result<Vec<StreamId>, StoreError> {
        let keys = Keys::tagged_with(sku);
        let reply: Result<StreamAutoClaimReply, _> = redis::cmd("XAUTOCLAIM")
            .arg(&keys.orders)
            .arg(GROUP)
            .arg(&self.consumer)
            .arg(self.config.claim_idle.as_millis() as u64)
            .arg("0-0")
            .arg("COUNT")
            .arg(BATCH)
            .query_async(conn)
            .await;
        match reply {
            Ok(reply) => {
                if !reply.claimed.is_empty() {
                    tracing::info!(
                        sku,
                        claimed = reply.claimed.len(),
                        "order worker: claimed idle messages"
                    );
                }
                Ok(reply.claimed)
            }
            Err(err) if stream_gone(&err) => {
                self.looked = None;
                Ok(Vec::new())
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Inserts the orders of `entries` in one transaction, then acks them.
    /// A batch refused by a conflict is written message by message: the
    /// others are acked, each refused one stays pending (a claim retries it).
    async fn process(
        &mut self,
        conn: &mut Conn,
        db: &mut Orders,
        sku: &str,
        entries: Vec<StreamId>,
    ) -> anyhow::Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let messages: Vec<(&str, OrderMessage)> = entries
            .iter()
            .filter_map(|entry| Some((entry.id.as_str(), OrderMessage::parse(sku, &entry.map)?)))
            .collect();
        if messages.len() < entries.len() {
            tracing::warn!(
                sku,
                "order worker: acking {} unreadable messages",
                entries.len() - messages.len()
            );
        }
        let all: Vec<OrderMessage> = messages.iter().map(|(_, m)| m.clone()).collect();
        let mut refused = BTreeSet::new();
        if let Err(err) = db.insert(&all, self.config.pay_within).await {
            if !is_conflict(&err) {
                // Not acked: read again from the pending entries once PostgreSQL answers.
                self.own_pending = true;
                return Err(err.context("cannot insert orders; they wait in the stream"));
            }
            for (id, message) in &messages {
                match db
                    .insert(std::slice::from_ref(message), self.config.pay_within)
                    .await
                {
                    Ok(_) => {}
                    Err(err) if is_conflict(&err) => {
                        refused.insert(*id);
                        self.refused.insert((*id).to_owned());
                        tracing::error!(
                            sku,
                            epoch = message.epoch,
                            sale = message.sale,
                            unit = message.unit,
                            "order worker: insert refused, not acked, retried at the next claim: {err:#}"
                        );
                        let _: i64 = redis::cmd("HINCRBY")
                            .arg(Keys::tagged_with(sku).ledger)
                            .arg("order_conflicts")
                            .arg(1)
                            .query_async(conn)
                            .await?;
                    }
                    Err(err) => {
                        self.own_pending = true;
                        return Err(err.context("cannot insert orders; they wait in the stream"));
                    }
                }
            }
        }
        if self.chaos.worker_crash_before_ack(conn).await? {
            let when = "after inserting orders, before acking them, as armed";
            self.chaos.crash_recorded(conn, sku, when).await;
        }
        if self.chaos.enabled() {
            self.gates(sku, &messages, &refused).await?;
        }
        let ids: Vec<&str> = entries
            .iter()
            .map(|e| e.id.as_str())
            .filter(|id| !refused.contains(id))
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        for id in &ids {
            self.refused.remove(*id);
        }
        // Acked and deleted in one step: the stream keeps only what is on
        // its way, so it (and every reconciliation's XRANGE of it) stays as
        // short as the backlog. The rows are committed by now, and reconcile
        // counts a message it no longer finds from PostgreSQL. Only acked
        // entries go: a pending one (refused, or not yet written) stays to be
        // delivered again.
        let orders = Keys::tagged_with(sku).orders;
        let _: (i64, i64) = redis::pipe()
            .atomic()
            .cmd("XACK")
            .arg(&orders)
            .arg(GROUP)
            .arg(&ids)
            .cmd("XDEL")
            .arg(&orders)
            .arg(&ids)
            .query_async(conn)
            .await?;
        Ok(())
    }
}

impl Worker {
    /// A scheduled buyer's order, committed and not acked yet: the worker
    /// stops at the buyer's gate (chaos mode only).
    async fn gates(
        &self,
        sku: &str,
        messages: &[(&str, OrderMessage)],
        refused: &BTreeSet<&str>,
    ) -> Result<(), StoreError> {
        let scheduled = messages.iter().filter_map(|(id, message)| {
            let schedule = message.schedule.as_deref()?;
            let schedule = crate::knobs::Schedule::parse(schedule).ok()?;
            (!refused.contains(id)).then_some((message, schedule))
        });
        for (message, schedule) in scheduled {
            // For the expiry pass, which meets the order, not the message.
            let mut conn = self.store.conn().await?;
            crate::gate::orders::note(&mut conn, sku, message.epoch, message.sale, &schedule)
                .await?;
            let Some(gates) = crate::gate::Gates::of(&self.chaos, &self.store) else {
                return Ok(());
            };
            // Under a name of its own: two workers may hold one order (one
            // claimed it from the other), and each is let go by itself.
            let committer = crate::knobs::Schedule {
                buyer: crate::gate::workers::committer(&schedule.buyer, &self.consumer),
                run: schedule.run,
            };
            crate::gate::Gate::hook(gates.client().await?, committer, &self.consumer, sku)
                .at(crate::gate::points::WORKER_COMMITTED)
                .await;
        }
        Ok(())
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
