//! The worker's reading: the registry's SKUs and their streams' groups,
//! the next entries (its own pending ones, or new ones), and the idle
//! entries of dead consumers claimed.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use redis::streams::{StreamAutoClaimReply, StreamId, StreamReadReply};

use super::{BATCH, BLOCK, Worker, ensure_group, stream_gone};
use crate::orders::message::{GROUP, REGISTRY};
use crate::store::{Conn, Keys, StoreError};

impl Worker {
    /// Reads the registry (at most every `BLOCK`) and makes sure each new
    /// SKU's stream has the group (created at the stream's start: a group
    /// made after the first sales still reads them).
    pub(super) async fn look_for_streams(&mut self, conn: &mut Conn) -> Result<(), StoreError> {
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
    pub(super) async fn read(
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
    pub(super) async fn claim_idle(
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
}
