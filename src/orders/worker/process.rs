//! The worker's writing: a batch's orders inserted in one transaction and
//! acked after the commit (a refused one left pending), and a scheduled
//! buyer's order stopped at its gate.

use std::collections::BTreeSet;

use redis::streams::StreamId;

use super::Worker;
use crate::orders::insert::{Orders, is_conflict};
use crate::orders::message::{GROUP, OrderMessage};
use crate::store::{Conn, Keys, StoreError};

impl Worker {
    /// Inserts the orders of `entries` in one transaction, then acks them.
    /// A batch refused by a conflict is written message by message: the
    /// others are acked, each refused one stays pending (a claim retries it).
    pub(super) async fn process(
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
