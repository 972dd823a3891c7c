//! One schedule's buyers, as the explorer sees them; in the files below,
//! what else a schedule's run holds (etcd's or ZooKeeper's queue, a
//! failing store, Redlock's nodes, the order pipeline, the database's
//! waits) and how it waits for its buyers to settle (`settle.rs`).

pub(super) mod elsewhere;
pub(super) mod failover;
pub(super) mod nodes;
pub(super) mod pipeline;
mod sessions;
mod settle;
pub(super) mod waits;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use anyhow::bail;
use redis::AsyncCommands;

use self::nodes::node_conn;
use super::{Choice, WORKING};

use crate::client::Deduction;
pub(super) use crate::gate::buyer_name as name;
use crate::gate::{ANSWERED, Arrival, Scheduler, WAITS_FOR_LOCK, is_note, points};
use crate::harness::stack::Stack;
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
    /// How many buyers the schedule has (A, B, ...).
    pub(super) count: u8,
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
    /// Redlock: the votes held (a round's question to one node each), and
    /// per buyer how many of its round's votes were heard and let go.
    pub(super) votes: Vec<Arrival>,
    pub(super) rounds: HashMap<u8, (usize, usize)>,
    /// Redlock: its nodes, where its lock lives (none for the other
    /// variants: their lock is in the stack's Redis).
    pub(super) nodes: Vec<redis::Client>,
    /// etcd, ZooKeeper: where the lock lives, and each buyer's entry in
    /// its queue (its key, its znode), learnt as the buyer queues.
    pub(super) elsewhere: Option<elsewhere::Elsewhere>,
    pub(super) entries: HashMap<u8, String>,
    /// Each buyer's request (its instance and path), sent again by a retry.
    pub(super) requests: HashMap<u8, (crate::client::StackClient, String)>,
    /// The stock's Redis, which a cut-off pauses.
    pub(super) stock_url: String,
    /// The PostgreSQL of the database's variants, if the stack has one.
    pub(super) postgres_url: Option<String>,
    /// That PostgreSQL asked which buyers it holds at a lock.
    pub(super) database: waits::DatabaseWaits,
    /// The order pipeline's workers and faults (the order variants').
    pub(super) pipeline: Option<pipeline::Pipeline>,
    /// The lock's store failing over (the failover cells').
    pub(super) failing: Option<failover::Failing>,
    /// A request id's claim ran out under its holder; the buyers told
    /// "in progress" who asked again since.
    pub(super) claim_ran_out: bool,
    pub(super) asked_again: HashSet<u8>,
    /// How many times each buyer sent its request.
    pub(super) asks: HashMap<u8, u8>,
}

impl Run<'_> {
    /// An arrival: a renewal goes on at once (a lease runs out only when
    /// the explorer chooses so); a buyer on its way now waits at its gate.
    pub(super) async fn heard(&mut self, arrival: Arrival) -> anyhow::Result<()> {
        // The order pipeline's (a worker at its turn or after a commit, an
        // expiry pass): never the buyer's own gate.
        if self.heard_by_pipeline(&arrival) {
            return Ok(());
        }
        // Where the model has no pipeline, the workers run free: a worker
        // after a commit, an expiry pass, goes on at once.
        if [points::WORKER_COMMITTED, points::BEFORE_GIVE_BACK]
            .iter()
            .any(|p| p.name == arrival.gate)
        {
            self.scheduler.release(&arrival).await?;
            return Ok(());
        }
        let Some(n) = arrival.buyer_index() else {
            return Ok(());
        };
        // A Redlock vote's answer: the buyer goes on by itself.
        if is_note(&arrival.gate) && arrival.gate != WAITS_FOR_LOCK {
            return Ok(());
        }
        if arrival.gate.starts_with(crate::gate::points::VOTE)
            && arrival.gate[crate::gate::points::VOTE.len()..].starts_with(':')
        {
            let nodes = self.nodes.len();
            let round = self.rounds.entry(n).or_insert((0, 0));
            if round.0 >= nodes {
                *round = (0, 0);
            }
            round.0 += 1;
            self.votes.push(arrival);
            return Ok(());
        }
        self.rounds.remove(&n);
        self.blocked.remove(&n);
        if arrival.gate == WAITS_FOR_LOCK {
            self.blocked.insert(n);
        } else if arrival.gate == ANSWERED {
            // (Only one on its way: one whose answer was seen before its
            // announcement is done already, and stays so.)
            if let Some(Buyer::Sent(request)) = self.sent(n) {
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
        } else if let Some(Buyer::Sent(request)) = self.sent(n) {
            // Holding the lock, or (etcd, ZooKeeper) a place in its queue
            // that those queued after it wait for.
            if matches!(
                arrival.gate.as_str(),
                "after_acquire" | "after_setnx" | "queued" | "before_wait"
            ) {
                self.holders.insert(n);
            }
            if arrival.gate == "queued" {
                self.learn_entry(n).await?;
            }
            self.buyers.insert(n, Buyer::Waiting(arrival, request));
        }
        Ok(())
    }

    /// Takes buyer `n` out if it is on its way (`Buyer::Sent`), leaving
    /// it as it is otherwise.
    fn sent(&mut self, n: u8) -> Option<Buyer> {
        match self.buyers.get(&n) {
            Some(Buyer::Sent(_)) => self.buyers.remove(&n),
            _ => None,
        }
    }

    /// Whether buyer `n` waits for its Redlock round's votes: every node
    /// asked, and not every question let go yet.
    fn asking(&self, n: u8) -> bool {
        let nodes = self.nodes.len();
        self.rounds
            .get(&n)
            .is_some_and(|&(heard, let_go)| heard >= nodes && let_go < nodes)
    }

    /// What may go on now: each buyer's gate, and each vote held, in the
    /// buyers' order.
    pub(super) fn releases(&self) -> Vec<Choice> {
        let mut releases = Vec::new();
        for n in 0..self.count {
            if let Some(Buyer::Waiting(arrival, _)) = self.buyers.get(&n) {
                releases.push(Choice::Release {
                    buyer: name(n),
                    gate: arrival.gate.clone(),
                });
            }
            // By node, whatever order they were heard in.
            let mut votes: Vec<&str> = (self.votes.iter())
                .filter(|v| v.buyer_index() == Some(n))
                .map(|v| v.gate.as_str())
                .collect();
            votes.sort_unstable();
            releases.extend(votes.into_iter().map(|gate| Choice::Release {
                buyer: name(n),
                gate: gate.to_owned(),
            }));
        }
        releases
    }

    /// Buyer `n`'s vote held at `gate`, if that is one.
    pub(super) fn held_vote(&mut self, n: u8, gate: &str) -> Option<Arrival> {
        let at = self
            .votes
            .iter()
            .position(|v| v.buyer_index() == Some(n) && v.gate == gate)?;
        Some(self.votes.remove(at))
    }

    /// Lets a held vote go: its node is asked.
    pub(super) async fn release_vote(&mut self, vote: Arrival) -> anyhow::Result<()> {
        if let Some(n) = vote.buyer_index()
            && let Some(round) = self.rounds.get_mut(&n)
        {
            round.1 += 1;
        }
        self.scheduler.release(&vote).await?;
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

    /// Lets `time` pass while the buyers live on: what arrives meanwhile
    /// is heard as a settle hears it (a watchdog's renewal goes on at
    /// once: time passes for every process but a frozen one).
    pub(super) async fn pass(&mut self, time: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + time;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            if let Some(arrival) = self.scheduler.next(left).await? {
                self.heard(arrival).await?;
            }
        }
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
    /// the buyers waiting for it are woken. In etcd and ZooKeeper the
    /// leases that run out are those of the buyers whose keep-alives
    /// stopped: the crashed and the frozen.
    pub(super) async fn lease_runs_out(&mut self) -> anyhow::Result<()> {
        if self.elsewhere.is_some() {
            let stopped: Vec<u8> = (self.buyers.iter())
                .filter(|(n, b)| matches!(b, Buyer::Crashed(..)) || self.frozen.contains(n))
                .map(|(&n, _)| n)
                .collect();
            return self.end_entries(&stopped).await;
        }
        if self.nodes.is_empty() {
            let mut conn = self.store.conn().await?;
            let _: bool = conn.pexpire(&self.keys.lock, 1).await?;
        }
        for node in &self.nodes {
            if let Some(mut conn) = node_conn(node).await {
                let _: bool = conn.pexpire(&self.keys.lock, 1).await?;
            }
        }
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

    /// The lock's TTL in ms (-1: none), `None` when there is no lock; on
    /// Redlock's nodes, the longest of the nodes that have it; in etcd and
    /// ZooKeeper, a lease (the buyers' own) while anyone is queued.
    pub(super) async fn lock(&self) -> anyhow::Result<Option<i64>> {
        if let Some(elsewhere) = &self.elsewhere {
            let queued = !elsewhere.queue().await?.is_empty();
            return Ok(queued.then_some(super::LEASE_MS as i64));
        }
        if self.nodes.is_empty() {
            let mut conn = self.store.conn().await?;
            let ttl: i64 = conn.pttl(&self.keys.lock).await?;
            return Ok((ttl != -2).then_some(ttl));
        }
        let mut longest = None;
        for node in &self.nodes {
            let Some(mut conn) = node_conn(node).await else {
                continue;
            };
            let ttl: i64 = conn.pttl(&self.keys.lock).await?;
            if ttl != -2 {
                longest = longest.max(Some(ttl));
            }
        }
        Ok(longest)
    }
}
