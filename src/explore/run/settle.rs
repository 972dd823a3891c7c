//! How a schedule waits for its buyers before each choice: until each is
//! at a gate, answered, or known to wait for a lock.

use std::time::Instant;

use anyhow::bail;

use super::{Buyer, Run, name};
use crate::explore::STALL;

impl Run<'_> {
    /// Waits until every buyer waits at a gate, has answered, or is known
    /// to wait for a lock: it said so ([`WAITS_FOR_LOCK`](crate::gate::WAITS_FOR_LOCK)) and the lock is
    /// not free, or the database holds it behind another's lock
    /// ([`waits::DatabaseWaits`]). Silence alone says nothing (a
    /// loaded machine is slow): a buyer on its way with no such sign is
    /// waited for, up to [`STALL`]. Renewals heard on the way go on at
    /// once. Answers are announced among the arrivals, so one wait hears
    /// both.
    pub(in crate::explore) async fn settle(&mut self) -> anyhow::Result<()> {
        let mut heard_at = Instant::now();
        loop {
            // An answer whose announcement was lost is seen all the same.
            for buyer in self.buyers.values_mut() {
                if let Buyer::Sent(request) = buyer
                    && request.is_finished()
                {
                    *buyer = Buyer::Done(request.await?);
                }
            }
            // A buyer waiting for a lock is on its way only once the lock
            // is free (a release wakes it): then it takes it, or notes
            // another wait.
            // (Free for buyer n: nobody else the explorer knows of holds it
            // or is queued for it, and its key, if it has one in this
            // Redis, is gone.)
            // (etcd's and ZooKeeper's have none in Redis.)
            let key_gone = match (self.blocked.is_empty(), &self.elsewhere) {
                (true, _) => false,
                (false, Some(_)) => true,
                (false, None) => self.lock().await?.is_none(),
            };
            let free = |n: &u8| key_gone && self.holders.iter().all(|h| h == n);
            let on_its_way: Vec<u8> = (self.buyers.iter())
                .filter(|(n, b)| {
                    matches!(b, Buyer::Sent(_))
                        && (!self.blocked.contains(n) || free(n))
                        && !self.asking(**n)
                })
                .map(|(n, _)| *n)
                .collect();
            // An order worker (or expiry pass) on its way gets there.
            let busy = self.pipeline.as_ref().is_some_and(|p| p.busy());
            if on_its_way.is_empty() && !busy {
                // Nobody on its way: only renewals can come; take those
                // already announced.
                match self.scheduler.try_next().await? {
                    Some(arrival) => self.heard(arrival).await?,
                    None => return Ok(()),
                }
                continue;
            }
            // Buyers the database holds at a lock another transaction has
            // (`pg-*`): they come when that one ends.
            if !busy
                && !on_its_way.is_empty()
                && self.database.held_at_a_lock().await >= on_its_way.len()
            {
                return Ok(());
            }
            let left = STALL.saturating_sub(heard_at.elapsed());
            if left.is_zero() {
                match busy {
                    true => bail!("an order worker stopped nowhere within {STALL:?}"),
                    false => bail!(
                        "{} on its way for {STALL:?}: at no gate, not answered, waiting for no lock",
                        on_its_way
                            .iter()
                            .map(|&n| name(n))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                }
            }
            // The database says nothing when a buyer reaches its lock:
            // asked again soon.
            let wait = match self.database.is_some() {
                true => left.min(super::waits::POLL),
                false => left,
            };
            if let Some(arrival) = self.scheduler.next(wait).await? {
                self.heard(arrival).await?;
                heard_at = Instant::now();
            }
        }
    }
}
