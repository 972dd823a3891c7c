//! One schedule's buyers, as the explorer sees them.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use anyhow::bail;
use redis::AsyncCommands;

use super::{SETTLE, WORKING};

use crate::client::Deduction;
pub(super) use crate::gate::buyer_name as name;
use crate::gate::{ANSWERED, Arrival, Scheduler, WAITS_FOR_LOCK, is_note};
use crate::lab::stack::Stack;
use crate::store::{Keys, Store};

/// What one buyer is doing.
pub(super) enum Buyer {
    Sent(tokio::task::JoinHandle<Deduction>),
    Waiting(Arrival, tokio::task::JoinHandle<Deduction>),
    Crashed(tokio::task::JoinHandle<Deduction>),
    Done(Deduction),
}

/// The explorer's side of one schedule.
pub(super) struct Run<'a> {
    pub(super) stack: &'a Stack,
    pub(super) scheduler: Scheduler,
    pub(super) buyers: HashMap<u8, Buyer>,
    pub(super) keys: Keys,
    pub(super) store: Store,
    /// Buyers whose watchdog's renewal came back since the last look.
    pub(super) renewed: HashSet<u8>,
    /// Buyers on their way that found the lock held and wait for it.
    pub(super) blocked: HashSet<u8>,
    /// Buyers that took the lock and hold it still, as far as the explorer
    /// knows (until their release, or until the lock is gone).
    pub(super) holders: HashSet<u8>,
    /// Buyers frozen (a freeze of their whole process): their watchdog's
    /// renewals are held, in `held_renewals`, until they wake.
    pub(super) frozen: HashSet<u8>,
    pub(super) held_renewals: Vec<Arrival>,
}

impl Run<'_> {
    /// Waits until every buyer waits at a gate, has answered, or waits
    /// for a lock (no arrival within [`SETTLE`]). Renewals heard on the
    /// way go on at once. Answers are announced among the arrivals, so
    /// one wait hears both.
    pub(super) async fn settle(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + SETTLE;
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
            let key_gone = match self.blocked.is_empty() {
                true => false,
                false => self.lock().await?.is_none(),
            };
            let free = |n: &u8| key_gone && self.holders.iter().all(|h| h == n);
            let sent = self
                .buyers
                .iter()
                .filter(|(n, b)| {
                    matches!(b, Buyer::Sent(_)) && (!self.blocked.contains(n) || free(n))
                })
                .count();
            if sent == 0 {
                // Nobody on its way: only renewals can come; take those
                // already announced.
                match self.scheduler.try_next().await? {
                    Some(arrival) => self.heard(arrival).await?,
                    None => return Ok(()),
                }
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            match self.scheduler.next(left).await? {
                Some(arrival) => self.heard(arrival).await?,
                // Whoever is still on its way waits for a lock.
                None => return Ok(()),
            }
        }
    }

    /// An arrival: a renewal goes on at once (a lease runs out only when
    /// the explorer chooses so); a buyer on its way now waits at its gate.
    async fn heard(&mut self, arrival: Arrival) -> anyhow::Result<()> {
        let Some(n) = arrival.buyer_index() else {
            return Ok(());
        };
        // A Redlock vote's answer: the buyer goes on by itself.
        if is_note(&arrival.gate) && arrival.gate != WAITS_FOR_LOCK {
            return Ok(());
        }
        self.blocked.remove(&n);
        if arrival.gate == WAITS_FOR_LOCK {
            self.blocked.insert(n);
        } else if arrival.gate == ANSWERED {
            if let Some(Buyer::Sent(request)) = self.buyers.remove(&n) {
                self.buyers.insert(n, Buyer::Done(request.await?));
            }
        } else if arrival.gate == "renewal" || arrival.gate == "renewed" {
            if arrival.gate == "renewed" {
                self.renewed.insert(n);
            }
            match self.frozen.contains(&n) {
                // A frozen process renews nothing until it wakes.
                true => self.held_renewals.push(arrival),
                false => self.scheduler.release(&arrival).await?,
            }
        } else if let Some(Buyer::Sent(request)) = self.buyers.remove(&n) {
            // Holding the lock, or (etcd, ZooKeeper) a place in its queue
            // that those queued after it wait for.
            if matches!(
                arrival.gate.as_str(),
                "after_acquire" | "after_setnx" | "queued"
            ) {
                self.holders.insert(n);
            }
            self.buyers.insert(n, Buyer::Waiting(arrival, request));
        }
        Ok(())
    }

    /// Waits until buyer `n`'s watchdog has heard back from a renewal.
    pub(super) async fn renewal_of(&mut self, n: u8, within: Duration) -> anyhow::Result<()> {
        if !self.renewal_within(n, within).await? {
            bail!("{}'s watchdog did not renew within {within:?}", name(n));
        }
        Ok(())
    }

    /// Whether buyer `n`'s watchdog heard back from a renewal within
    /// `within` (a watchdog that found its lock lost renews no more).
    pub(super) async fn renewal_within(&mut self, n: u8, within: Duration) -> anyhow::Result<bool> {
        self.renewed.clear();
        let deadline = Instant::now() + within;
        while !self.renewed.contains(&n) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            if let Some(arrival) = self
                .scheduler
                .next(left.min(Duration::from_millis(100)))
                .await?
            {
                self.heard(arrival).await?;
            }
        }
        Ok(true)
    }

    /// Buyer `n` wakes from a freeze: its watchdog's held renewals go on,
    /// and (`watchdog`) the explorer waits until one came back, as a woken
    /// process's watchdog renews before the process goes on. A renewal it
    /// held comes back for certain; with none held, the next comes within
    /// two of the short lease's renewal periods, unless the watchdog had
    /// already found its lock lost and stopped.
    pub(super) async fn wake_up(&mut self, n: u8, watchdog: bool) -> anyhow::Result<()> {
        self.frozen.remove(&n);
        let held = std::mem::take(&mut self.held_renewals);
        let (mine, others): (Vec<Arrival>, Vec<Arrival>) =
            held.into_iter().partition(|a| a.buyer_index() == Some(n));
        self.held_renewals = others;
        self.renewed.remove(&n);
        let held = !mine.is_empty();
        for arrival in mine {
            self.scheduler.release(&arrival).await?;
        }
        match (watchdog, held) {
            (true, true) => self.renewal_of(n, super::STALL).await,
            (true, false) => {
                let periods = Duration::from_millis(2 * super::EARLY_LEASE_MS / 3);
                self.renewal_within(n, periods).await.map(|_| ())
            }
            (false, _) => Ok(()),
        }
    }

    /// The lock's lease runs out (`PEXPIRE 1`, and the key is gone), and
    /// the buyers waiting for it are woken.
    pub(super) async fn lease_runs_out(&mut self) -> anyhow::Result<()> {
        let mut conn = self.store.conn().await?;
        let _: bool = conn.pexpire(&self.keys.lock, 1).await?;
        while self.lock().await?.is_some() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        self.holders.clear();
        self.wake().await
    }

    /// Lets buyer `n` go from its gate.
    pub(super) async fn release(&mut self, n: u8) -> anyhow::Result<()> {
        if let Some(Buyer::Waiting(arrival, request)) = self.buyers.remove(&n) {
            if arrival.gate == "before_release" {
                self.holders.remove(&n);
            }
            self.scheduler.release(&arrival).await?;
            self.buyers.insert(n, Buyer::Sent(request));
        }
        Ok(())
    }

    /// The buyer waiting at a gate of its work, if one is.
    pub(super) fn working(&self) -> Option<u8> {
        self.buyers.iter().find_map(|(&n, b)| match b {
            Buyer::Waiting(arrival, _) if WORKING.contains(&arrival.gate.as_str()) => Some(n),
            _ => None,
        })
    }

    /// Wakes the buyers waiting for the lock, as a release does: where a
    /// lease ran out or the key vanished, a waiter would find out at its
    /// next look (at the holder's TTL), which the explorer brings forward.
    pub(super) async fn wake(&self) -> anyhow::Result<()> {
        let mut conn = self.store.conn().await?;
        let channel = crate::lock::wakeups::release_channel(&self.keys.lock);
        let _: i64 = conn.publish(channel, &self.keys.lock).await?;
        Ok(())
    }

    pub(super) async fn lock(&self) -> anyhow::Result<Option<i64>> {
        let mut conn = self.store.conn().await?;
        let ttl: i64 = conn.pttl(&self.keys.lock).await?;
        Ok((ttl != -2).then_some(ttl))
    }
}

/// The faults of `scenario` (the checker's bounds): deletions, crashes,
/// and whether a live holder's lease may run out (business work as long
/// as its lease, or a freeze); a dead holder's always may.
pub(super) fn faults(
    variant: crate::variants::Variant,
    scenario: crate::variants::Scenario,
) -> (u8, u8, bool) {
    let bounds = crate::check::bounds(scenario, crate::check::protocol::Protocol::of(variant));
    let time = bounds.work >= bounds.lease || bounds.pauses > 0;
    (bounds.vanishes, bounds.crashes, time)
}
