//! The lock's queue in etcd: putting a contender's key in one transaction,
//! waiting for the keys created before it to go (watching its predecessor's
//! deletion), and the range requests and deletes that read and leave it.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::EtcdLock;
use super::gateway::{b64, b64_bytes, from_b64, int, prefix_end};
use crate::Error;

impl EtcdLock {
    /// Puts our key unless it is there (one transaction), and reads the
    /// queue's first key: our key's create revision, the owner's, and the
    /// cluster's id.
    pub(super) async fn queue(
        &self,
        key: &str,
        lease: i64,
    ) -> Result<(i64, Option<i64>, String), Error> {
        let owner = json!({"request_range": self.first_created(None, "ASCEND")});
        let txn = json!({
            "compare": [{"target": "CREATE", "key": b64(key), "create_revision": "0", "result": "EQUAL"}],
            "success": [{"request_put": {"key": b64(key), "value": "", "lease": lease.to_string()}}, owner],
            "failure": [{"request_range": {"key": b64(key)}}, owner],
        });
        let answer = self.client.call("/v3/kv/txn", &txn).await?;
        let responses = &answer["responses"];
        let mine = if answer["succeeded"].as_bool().unwrap_or(false) {
            int(&answer["header"]["revision"])?
        } else {
            int(&responses[0]["response_range"]["kvs"][0]["create_revision"])?
        };
        if mine == 0 {
            return Err(Error::EtcdProtocol(format!(
                "lock transaction answered {answer}"
            )));
        }
        let owner = match responses[1]["response_range"]["kvs"].get(0) {
            Some(kv) => Some(int(&kv["create_revision"])?),
            None => None,
        };
        // A 64-bit id the gateway sends as a string: kept as sent.
        let cluster = match &answer["header"]["cluster_id"] {
            Value::String(id) => id.clone(),
            other => other.to_string(),
        };
        Ok((mine, owner, cluster))
    }

    /// Waits until no key created before `mine` is left, watching each time
    /// the last one created before it (our predecessor) until it is deleted.
    pub(super) async fn wait_for_predecessors(
        &self,
        mine: i64,
        deadline: Instant,
    ) -> Result<(), Error> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Busy);
            }
            let answer = match self
                .client
                .call(
                    "/v3/kv/range",
                    &self.first_created(Some(mine - 1), "DESCEND"),
                )
                .await
            {
                Ok(answer) => answer,
                Err(Error::EtcdUnavailable(why)) => {
                    tracing::debug!(%why, "etcd unavailable while waiting; trying again");
                    tokio::time::sleep(Duration::from_millis(100).min(left)).await;
                    continue;
                }
                Err(err) => return Err(err),
            };
            let Some(predecessor) = answer["kvs"].get(0) else {
                return Ok(());
            };
            let key = from_b64(&predecessor["key"])
                .ok_or_else(|| Error::EtcdProtocol(format!("a key not in UTF-8: {predecessor}")))?;
            let seen = int(&answer["header"]["revision"])?;
            // From the revision just after the one read: a deletion in
            // between is replayed by the watch, never missed.
            self.hook.at(crate::WAITS).await;
            self.await_deletion(&key, seen + 1, left).await;
        }
    }

    /// Returns when `key` is deleted at or after `from`, the watch breaks
    /// (a member died: the caller looks again), or `left` has passed.
    async fn await_deletion(&self, key: &str, from: i64, left: Duration) {
        let mut stream = match self.client.watch_deletes(key, from, left).await {
            Ok(stream) => stream,
            Err(err) => {
                tracing::debug!(%err, "cannot watch; looking again");
                tokio::time::sleep(Duration::from_millis(100).min(left)).await;
                return;
            }
        };
        loop {
            match stream.next().await {
                Ok(result) => {
                    let deleted = result["events"].as_array().is_some_and(|e| !e.is_empty());
                    // A watch cancelled (its start compacted away): look again.
                    if deleted || result["canceled"].as_bool().unwrap_or(false) {
                        return;
                    }
                }
                Err(err) => {
                    tracing::debug!(%err, "the watch ended; looking again");
                    return;
                }
            }
        }
    }

    pub(super) async fn exists(&self, key: &str) -> Result<bool, Error> {
        let answer = self
            .client
            .call(
                "/v3/kv/range",
                &json!({"key": b64(key), "count_only": true}),
            )
            .await?;
        Ok(int(&answer["count"])? > 0)
    }

    pub(super) async fn delete(&self, key: &str) -> Result<(), Error> {
        self.client
            .call("/v3/kv/deleterange", &json!({"key": b64(key)}))
            .await
            .map(|_| ())
    }

    /// A range request for the queue's first key by creation (`ASCEND`: the
    /// owner) or last (`DESCEND`), created at or before `max_revision`.
    pub(super) fn first_created(&self, max_revision: Option<i64>, order: &str) -> Value {
        let mut range = json!({
            "key": b64(&self.prefix),
            "range_end": b64_bytes(&prefix_end(&self.prefix)),
            "sort_target": "CREATE",
            "sort_order": order,
            "limit": 1,
        });
        if let Some(max) = max_revision {
            range["max_create_revision"] = json!(max.to_string());
        }
        range
    }
}
