//! One schedule's buyers, as the explorer sees them.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use anyhow::bail;
use redis::AsyncCommands;

use super::{SETTLE, WORKING};

/// How long a look for renewals waits when no buyer is on its way.
const DRAIN: Duration = Duration::from_millis(10);
use crate::client::Deduction;
pub(super) use crate::gate::buyer_name as name;
use crate::gate::{Arrival, Scheduler};
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
}

impl Run<'_> {
    /// Waits until every buyer waits at a gate, has answered, or waits
    /// for a lock (no arrival within [`SETTLE`]). Renewals heard on the
    /// way go on at once.
    pub(super) async fn settle(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + SETTLE;
        loop {
            for buyer in self.buyers.values_mut() {
                if let Buyer::Sent(request) = buyer
                    && request.is_finished()
                {
                    *buyer = Buyer::Done(request.await?);
                }
            }
            let sent = self
                .buyers
                .values()
                .filter(|b| matches!(b, Buyer::Sent(_)))
                .count();
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            // Nobody on its way: only renewals can come; take those waiting.
            let wait = match sent {
                0 => DRAIN,
                _ => left.min(Duration::from_millis(20)),
            };
            let heard = self.scheduler.next(wait).await?;
            let Some(arrival) = heard else {
                match sent {
                    0 => return Ok(()),
                    _ => continue,
                }
            };
            self.heard(arrival).await?;
        }
    }

    /// An arrival: a renewal goes on at once (a lease runs out only when
    /// the explorer chooses so); a buyer on its way now waits at its gate.
    async fn heard(&mut self, arrival: Arrival) -> anyhow::Result<()> {
        let Some(n) = arrival.buyer_index() else {
            return Ok(());
        };
        if arrival.gate == "renewal" || arrival.gate == "renewed" {
            if arrival.gate == "renewed" {
                self.renewed.insert(n);
            }
            self.scheduler.release(&arrival).await?;
        } else if let Some(Buyer::Sent(request)) = self.buyers.remove(&n) {
            self.buyers.insert(n, Buyer::Waiting(arrival, request));
        }
        Ok(())
    }

    /// Waits until buyer `n`'s watchdog has heard back from a renewal.
    pub(super) async fn renewal_of(&mut self, n: u8, within: Duration) -> anyhow::Result<()> {
        self.renewed.clear();
        let deadline = Instant::now() + within;
        while !self.renewed.contains(&n) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!("{}'s watchdog did not renew within {within:?}", name(n));
            }
            if let Some(arrival) = self
                .scheduler
                .next(left.min(Duration::from_millis(100)))
                .await?
            {
                self.heard(arrival).await?;
            }
        }
        Ok(())
    }

    /// Lets buyer `n` go from its gate.
    pub(super) async fn release(&mut self, n: u8) -> anyhow::Result<()> {
        if let Some(Buyer::Waiting(arrival, request)) = self.buyers.remove(&n) {
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

    pub(super) async fn lock(&self) -> anyhow::Result<Option<i64>> {
        let mut conn = self.store.conn().await?;
        let ttl: i64 = conn.pttl(&self.keys.lock).await?;
        Ok((ttl != -2).then_some(ttl))
    }
}
