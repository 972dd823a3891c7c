//! The live side of a replay: the buyers' requests, the gates they wait
//! at and the lock's lease; the ledger's verdict is in `verdict.rs`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use redis::AsyncCommands;

use crate::check::model::Sale;
use crate::client::Deduction;
use crate::gate::{Arrival, Scheduler, WAITS_FOR_LOCK};
use crate::store::{Keys, Store};

use crate::harness::stack::Stack;

/// How long a replay waits for a buyer to reach its next gate.
const ARRIVAL: Duration = Duration::from_secs(20);

/// The gates of the real code, in the order a buyer passes them.
const ORDER: [&str; 10] = [
    "before_acquire",
    "after_setnx",
    "before_wait",
    "after_acquire",
    "after_read",
    "before_check",
    "before_write",
    "before_enqueue",
    "before_release",
    "after_release",
];

/// The live side of a replay: the buyers' requests and their gates.
pub(super) struct Live<'a> {
    pub(super) variant: &'static str,
    pub(super) sale: &'a Sale,
    pub(super) stack: &'a Stack,
    pub(super) store: Store,
    pub(super) keys: Keys,
    pub(super) sku: String,
    pub(super) run: String,
    pub(super) redis_url: String,
    /// The cell plays the order pipeline (its buyers send request ids).
    pub(super) orders: bool,
    pub(super) lease_ms: u64,
    pub(super) scheduler: Scheduler,
    /// Arrivals heard and not yet released, per buyer.
    pub(super) heard: HashMap<u8, Arrival>,
    /// A watchdog's arrivals (`renewal`, `renewed`), per buyer and gate.
    pub(super) renewals: HashMap<(u8, String), Arrival>,
    pub(super) requests: HashMap<u8, tokio::task::JoinHandle<Deduction>>,
    pub(super) answers: HashMap<u8, Deduction>,
    /// Redlock: the votes heard and not yet let go, per buyer and node.
    pub(super) votes: HashMap<(u8, usize), Arrival>,
    /// Redlock: how many answers each buyer's rounds had from each node.
    pub(super) voted: HashMap<(u8, usize), u32>,
    /// Redlock: how many rounds each buyer began.
    pub(super) rounds: HashMap<u8, u32>,
    /// Redlock: the nodes the replay started again (stopped with it).
    pub(super) restarted: HashMap<usize, crate::up::redis::RedisServer>,
    /// A failover cell: the replicated Redis it fails over.
    pub(super) failing: Option<super::failing::Failing>,
    /// What the buyers were told, for the history checker.
    pub(super) recorder: crate::history::Recorder,
}

pub(super) use crate::gate::buyer_name as name;

impl Live<'_> {
    /// Sends buyer `n`'s request, on an instance of its own (or the one
    /// instance, for a scenario of one process).
    pub(super) fn send(&mut self, n: u8) {
        let instances = &self.stack.instances;
        let at = match self.sale.bounds.one_process {
            true => 0,
            false => usize::from(n) % instances.len(),
        };
        let client = (self.stack.client)
            .recording(self.recorder.clone())
            .at(&instances[at].url);
        let mut path = format!(
            "/deductStock/{}?sku={}&work_ms=0&lease_ms={}&schedule={}:{}",
            self.variant,
            self.sku,
            self.lease_ms,
            self.run,
            name(n)
        );
        if self.orders {
            path.push_str(&format!("&request_id={}", self.request_id(n)));
        }
        if self.sale.bounds.wait_replicas {
            path.push_str("&replicas=1");
        }
        self.requests
            .insert(n, tokio::spawn(async move { client.deduct(&path).await }));
    }

    /// Waits until buyer `n` waits at `gate`, letting it go from the gates
    /// before it; what it passed on the way.
    pub(super) async fn reach(&mut self, n: u8, gate: &str) -> anyhow::Result<Vec<String>> {
        let want = ORDER.iter().position(|g| *g == gate).unwrap_or(0);
        let mut passed = Vec::new();
        loop {
            let arrival = match self.heard.remove(&n) {
                Some(arrival) => arrival,
                None => self.hear(n).await?,
            };
            if arrival.gate == gate {
                self.heard.insert(n, arrival);
                return Ok(passed);
            }
            let at = ORDER.iter().position(|g| *g == arrival.gate);
            match at {
                Some(at) if at < want => {
                    self.scheduler.release(&arrival).await?;
                    passed.push(arrival.gate);
                }
                _ => bail!(
                    "{} arrived at {}, the model has it at {gate}: the live run went its own way",
                    name(n),
                    arrival.gate
                ),
            }
        }
    }

    /// The next arrival of buyer `n` (others' are kept).
    async fn hear(&mut self, n: u8) -> anyhow::Result<Arrival> {
        let deadline = Instant::now() + ARRIVAL;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(arrival) = self
                .scheduler
                .next(left.max(Duration::from_millis(1)))
                .await?
            else {
                bail!("{} reached no gate within {ARRIVAL:?}", name(n));
            };
            match arrival.buyer_index() {
                Some(buyer) if buyer == n && !aside(&arrival.gate) => return Ok(arrival),
                _ => self.keep(arrival),
            }
        }
    }

    /// Buyer `n`'s watchdog renews (the model's tick renews it, or finds
    /// its lock gone): its next renewal goes, and the replay waits until
    /// its outcome is known to the buyer.
    pub(super) async fn renew(&mut self, n: u8) -> anyhow::Result<String> {
        for gate in ["renewal", "renewed"] {
            let key = (n, gate.to_owned());
            self.keep_until(
                |live| live.renewals.contains_key(&key),
                || format!("{}'s watchdog reached no {gate}", name(n)),
            )
            .await?;
            if let Some(arrival) = self.renewals.remove(&key) {
                self.scheduler.release(&arrival).await?;
            }
        }
        Ok(format!("{}'s watchdog sends its renewal", name(n)))
    }

    /// Hears arrivals and keeps them until `done` says what the replay
    /// waits for came ([`ARRIVAL`] at most: then what did not come, `what`).
    pub(super) async fn keep_until(
        &mut self,
        done: impl Fn(&Self) -> bool,
        what: impl Fn() -> String,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + ARRIVAL;
        while !done(self) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self
                .scheduler
                .next(left.max(Duration::from_millis(1)))
                .await?
            {
                Some(arrival) => self.keep(arrival),
                None => bail!("{} within {ARRIVAL:?}", what()),
            }
        }
        Ok(())
    }

    /// Keeps an arrival heard while waiting for another: a watchdog's
    /// waits for the model's tick, a Redlock vote for the model's step that
    /// asks its node; a vote's answer is counted; a wait for a lock is only
    /// noted (the lock, not the replay, ends it).
    pub(super) fn keep(&mut self, arrival: Arrival) {
        let Some(buyer) = arrival.buyer_index() else {
            return;
        };
        if let Some((answered, k)) = crate::gate::vote_gate(&arrival.gate) {
            match answered {
                true => *self.voted.entry((buyer, k)).or_insert(0) += 1,
                false => {
                    self.votes.insert((buyer, k), arrival);
                }
            }
            return;
        }
        match arrival.gate.as_str() {
            WAITS_FOR_LOCK => {}
            "renewal" | "renewed" => {
                self.renewals.insert((buyer, arrival.gate.clone()), arrival);
            }
            _ => {
                self.heard.insert(buyer, arrival);
            }
        }
    }

    /// Lets buyer `n` go from where it waits, and waits for its answer.
    async fn finish(&mut self, n: u8) -> anyhow::Result<String> {
        if let Some(arrival) = self.heard.remove(&n) {
            self.scheduler.release(&arrival).await?;
        }
        let request = self.requests.remove(&n).context("a buyer answered twice")?;
        let answer = request.await?;
        let said = answered(&answer);
        self.answers.insert(n, answer);
        Ok(said)
    }

    /// Waits until the wall-clock time in the live lock's value has passed
    /// (`setnx-expiry`).
    pub(super) async fn expiry_passed(&mut self) -> anyhow::Result<String> {
        let mut conn = self.store.conn().await?;
        let value: Option<i64> = conn.get(&self.keys.lock).await?;
        let Some(expires) = value else {
            return Ok("no lock to expire".to_owned());
        };
        let now = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64)
        };
        let left = expires + 1 - now();
        if left > 0 {
            tokio::time::sleep(Duration::from_millis(left as u64)).await;
        }
        Ok(format!(
            "the expiry time in the lock passes ({} ms later)",
            left.max(0)
        ))
    }

    /// Waits until the live lock key is gone (its lease ran out).
    pub(super) async fn lock_gone(&mut self) -> anyhow::Result<String> {
        let mut conn = self.store.conn().await?;
        let started = Instant::now();
        let limit = Duration::from_millis(self.lease_ms) + Duration::from_secs(2);
        loop {
            let exists: bool = conn.exists(&self.keys.lock).await?;
            if !exists {
                return Ok(format!(
                    "the lock's lease ran out ({} ms later)",
                    started.elapsed().as_millis()
                ));
            }
            if started.elapsed() > limit {
                bail!("the live lock outlived its lease by 2 s");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Whether an arrival at `gate` is kept aside rather than taken as the
/// buyer's next gate (a watchdog's, a Redlock vote's, a note).
fn aside(gate: &str) -> bool {
    matches!(gate, "renewal" | "renewed")
        || crate::gate::is_note(gate)
        || crate::gate::vote_gate(gate).is_some()
}

/// An answer in a few words.
fn answered(answer: &Deduction) -> String {
    match (&answer.body, answer.status) {
        (crate::client::DeductBody::Outcome(body), status) => match (body.unit, &body.reason) {
            (Some(unit), _) => format!("{status} sold unit {unit}"),
            (None, Some(reason)) => format!("{status} {reason}"),
            (None, None) => format!("{status} {:?}", body.outcome),
        },
        (_, status) => format!("{status} (no outcome)"),
    }
}

impl Live<'_> {
    /// Lets buyer `n` through its last gates to its answer.
    pub(super) async fn finish_through(&mut self, n: u8) -> anyhow::Result<String> {
        self.reach(n, "after_release").await?;
        let said = self.finish(n).await?;
        Ok(format!("{} answers {said}", name(n)))
    }
}
