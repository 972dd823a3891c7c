//! The faults a schedule may strike: which the scenario offers at a step
//! (its budget of each, and where each may land), and striking one.

use redis::AsyncCommands;

use super::run::{Buyer, Run, name};
use super::{Choice, STALL, STOCK, WORKING, index};
use crate::check::protocol::{Program, Protocol};
use crate::variants::{Scenario, Variant};

/// What a schedule may still strike (the checker's bounds), and how.
pub(super) struct Budget {
    vanishes: u8,
    crashes: u8,
    freezes: u8,
    lates: u8,
    restarts: u8,
    /// Calls cut off by a paused Redis.
    cutoffs: u8,
    /// A request id's claim running out under its holder (`retry-storm`).
    pub(super) claim_expiries: u8,
    /// Redlock's nodes restarting empty (or coming back when down).
    node_restarts: u8,
    /// Ticks a Redlock round may wait for a slow node, and a tick.
    slow_votes: u8,
    tick: std::time::Duration,
    /// Only while a holder works (`lock-vanishes-early`).
    vanish_early: bool,
    /// Crashes only while the buyer works (`kill-instance`).
    crash_only_in_work: bool,
    /// A live holder's lease may run out (business work as long as its
    /// lease, or a freeze); a dead holder's always may.
    time: bool,
    /// An early deletion is noticed by the working holder's next renewal.
    early: bool,
    /// The lock has a watchdog.
    pub(super) watchdog: bool,
    /// The lock is the database's, held by the holder's transaction.
    transaction: bool,
}

impl Budget {
    pub(super) fn of(
        variant: Variant,
        scenario: Scenario,
        early: bool,
        tick: std::time::Duration,
    ) -> Budget {
        let bounds = crate::check::bounds(scenario, Protocol::of(variant));
        let watchdog = Protocol::of(variant).watchdog();
        Budget {
            vanishes: bounds.vanishes,
            crashes: bounds.crashes,
            freezes: bounds.pauses,
            lates: if watchdog { bounds.late_renewals } else { 0 },
            restarts: bounds.outages,
            cutoffs: bounds.cutoffs,
            claim_expiries: u8::from(bounds.one_request),
            node_restarts: bounds.restarts,
            slow_votes: bounds.slow_votes,
            tick,
            vanish_early: bounds.vanish_early,
            crash_only_in_work: bounds.crash_only_in_work,
            time: bounds.work >= bounds.lease || bounds.pauses > 0,
            early,
            watchdog,
            transaction: Protocol::of(variant).program == Program::Transaction,
        }
    }
}

/// Whether the lock (its TTL, `None`: no lock) has a lease that runs out
/// by itself: a TTL, or `setnx-expiry`'s value, the time it expires (its
/// key has no TTL).
pub(super) fn leased(variant: Variant, lock: Option<i64>) -> bool {
    match variant {
        Variant::SetnxExpiry => lock.is_some(),
        _ => lock.is_some_and(|ttl| ttl > 0),
    }
}

impl Run<'_> {
    /// Whether a buyer that crashed held the lock.
    pub(super) fn holder_dead(&self) -> bool {
        (self.buyers.iter())
            .any(|(n, b)| matches!(b, Buyer::Crashed(..)) && self.holders.contains(n))
    }

    /// The faults the schedule may strike now, with `waiting` the buyers
    /// at a gate, `lock` the lock's TTL (`None`: no lock) and `down`
    /// Redlock's nodes down.
    pub(super) fn offered(
        &self,
        waiting: &[u8],
        (lock, down): (Option<i64>, &[usize]),
        budget: &Budget,
        variant: Variant,
    ) -> Vec<Choice> {
        let mut faults = Vec::new();
        if budget.node_restarts > 0 {
            // A node down comes back; under a frozen buyer any node may
            // restart empty.
            let nodes = match self.frozen.is_empty() {
                true => down.to_vec(),
                false => (0..self.nodes.len()).collect(),
            };
            faults.extend(
                nodes
                    .into_iter()
                    .map(|k| Choice::NodeRestart { node: k as u8 }),
            );
        }
        if budget.vanishes > 0
            && lock.is_some()
            && (!budget.vanish_early || self.working().is_some())
        {
            faults.push(Choice::Vanish);
        }
        // A lease that runs out: a watchdog's is renewed while its holder
        // lives; a dead holder's runs out in every scenario.
        let dead = self.holder_dead();
        let lease = leased(variant, lock);
        // A frozen holder renews nothing: its lease runs out too.
        let frozen = self.holders.iter().any(|n| self.frozen.contains(n));
        // A lock a failover brought back after its holder let it go: no
        // watchdog renews it.
        let restored = self.failing.is_some() && self.holders.is_empty();
        if ((budget.time && !budget.watchdog) || dead || frozen || restored) && lease {
            faults.push(Choice::Expire);
        }
        // A database lock's frozen holder: the database ends its silent
        // session once its lease (the idle timeout) has passed.
        if budget.transaction && frozen {
            faults.push(Choice::Expire);
        }
        let holding = |n: &&u8| self.holders.contains(n);
        if budget.lates > 0 && lease {
            // A holder at its work (time passes only there), not frozen.
            let working = |n: &&u8| match self.buyers.get(*n) {
                Some(Buyer::Waiting(arrival, _)) => WORKING.contains(&arrival.gate.as_str()),
                _ => false,
            };
            faults.extend(
                waiting
                    .iter()
                    .filter(holding)
                    .filter(|n| !self.frozen.contains(n))
                    .filter(working)
                    .map(|&n| Choice::Late { buyer: name(n) }),
            );
        }
        if budget.freezes > 0 {
            // A holder, anywhere in its section.
            faults.extend(
                waiting
                    .iter()
                    .filter(holding)
                    .map(|&n| Choice::Freeze { buyer: name(n) }),
            );
        }
        // A round in flight (a vote let go, another held) waits for a
        // slow node.
        let in_round = self.rounds.values().any(|&(_, let_go)| let_go > 0);
        if budget.slow_votes > 0 && in_round && !self.votes.is_empty() {
            faults.push(Choice::SlowVote);
        }
        // Under a working buyer; a script has no work to be under: any
        // buyer waiting at a gate (before its script, or after it).
        let script = !Protocol::of(variant).leased();
        if budget.restarts > 0 && (self.working().is_some() || (script && !waiting.is_empty())) {
            faults.push(Choice::Restart);
        }
        if budget.cutoffs > 0 {
            // A buyer about to call its script.
            let calling = |n: &&u8| match self.buyers.get(*n) {
                Some(Buyer::Waiting(arrival, _)) => arrival.gate == "before_acquire",
                _ => false,
            };
            faults.extend(
                waiting
                    .iter()
                    .filter(calling)
                    .map(|&n| Choice::Cutoff { buyer: name(n) }),
            );
        }
        if let Some(failing) = &self.failing {
            faults.extend(failing.offered(lock.is_some()));
        }
        if budget.crashes > 0 {
            // Anywhere, or (`kill-instance`) only while it works.
            let may_die = |n: &&u8| match self.buyers.get(*n) {
                Some(Buyer::Waiting(arrival, _)) if budget.crash_only_in_work => {
                    WORKING.contains(&arrival.gate.as_str())
                }
                _ => true,
            };
            faults.extend(
                waiting
                    .iter()
                    .filter(may_die)
                    .map(|&n| Choice::Crash { buyer: name(n) }),
            );
        }
        faults
    }

    /// Strikes `fault` (a choice other than a release) on `sku`.
    pub(super) async fn strike(
        &mut self,
        fault: &Choice,
        budget: &mut Budget,
        variant: Variant,
        sku: &str,
    ) -> anyhow::Result<()> {
        match fault {
            Choice::Release { .. } | Choice::Retry { .. } => {}
            Choice::Work { .. }
            | Choice::Ack { .. }
            | Choice::WorkerCrash { .. }
            | Choice::PostgresStop
            | Choice::PostgresStart
            | Choice::Pay { .. }
            | Choice::Overdue { .. }
            | Choice::GiveBack { .. }
            | Choice::DataLoss => self.pipeline_step(fault).await?,
            Choice::HoldReplication | Choice::Failover => self.fail(fault, sku).await?,
            Choice::ClaimRunsOut => {
                budget.claim_expiries -= 1;
                self.claims_run_out().await?;
            }
            Choice::Cutoff { buyer } => {
                budget.cutoffs -= 1;
                self.cut_off(index(buyer)).await?;
            }
            // etcd's and ZooKeeper's keep-alives pass no gate: the lease
            // ends, and the holder learns it whenever it does.
            Choice::Late { buyer } if self.elsewhere.is_some() => {
                budget.lates -= 1;
                self.end_entries(&[index(buyer)]).await?;
            }
            Choice::Late { buyer } => {
                budget.lates -= 1;
                self.lease_runs_out().await?;
                self.renewal_of(index(buyer), STALL).await?;
            }
            Choice::Freeze { buyer } => {
                budget.freezes -= 1;
                self.frozen.insert(index(buyer));
            }
            Choice::Vanish => {
                budget.vanishes -= 1;
                let holder = self.working();
                self.delete_lock().await?;
                self.holders.clear();
                self.wake().await?;
                // Early: the working holder's renewal finds its lock gone
                // before it goes on.
                if let Some(n) = holder.filter(|n| budget.early && !self.frozen.contains(n)) {
                    self.renewal_of(n, STALL).await?;
                }
            }
            Choice::Expire if variant == Variant::SetnxExpiry => {
                // Its value is the time it expires: a time long past.
                let mut conn = self.store.conn().await?;
                let _: Option<String> = redis::cmd("SET")
                    .arg(&self.keys.lock)
                    .arg(1)
                    .arg("XX")
                    .query_async(&mut conn)
                    .await?;
                self.holders.clear();
                self.wake().await?;
            }
            // A database lock: its frozen holder's session ended by the
            // database itself, once silent for its lease.
            Choice::Expire if budget.transaction => self.silent_session_ends().await?,
            // The store's side of a lease running out: the locks it is
            // offered for keep no clock of their own to notice (no
            // watchdog, a dead or frozen one).
            Choice::Expire => self.lease_runs_out().await?,
            Choice::Restart => {
                budget.restarts -= 1;
                // A Redis restarted has forgotten its scripts too.
                let mut conn = self.store.conn().await?;
                let _: () = redis::cmd("SCRIPT")
                    .arg("FLUSH")
                    .query_async(&mut conn)
                    .await?;
                self.stack.client.reset(sku, STOCK, 0).await?;
                self.holders.clear();
                self.wake().await?;
            }
            Choice::SlowVote => {
                budget.slow_votes -= 1;
                self.pass(budget.tick).await?;
            }
            Choice::NodeRestart { node } => {
                budget.node_restarts -= 1;
                self.node_restart(usize::from(*node)).await?;
            }
            Choice::Crash { buyer } => {
                budget.crashes -= 1;
                let n = index(buyer);
                if let Some(Buyer::Waiting(_, request)) = self.buyers.remove(&n) {
                    self.buyers.insert(n, Buyer::Crashed(request));
                }
                // A process that dies takes its connections with it: the
                // transaction a holder of the database's lock is in rolls
                // back, its lock freed. The buyer left at its gate does not
                // die, so its connection is ended for it.
                if budget.transaction && self.holders.remove(&n) {
                    self.end_held_transaction().await?;
                }
            }
        }
        Ok(())
    }

    /// Deletes the lock's key (on every Redlock node, for Redlock).
    async fn delete_lock(&mut self) -> anyhow::Result<()> {
        if self.nodes.is_empty() {
            let mut conn = self.store.conn().await?;
            let _: i64 = conn.del(&self.keys.lock).await?;
        }
        for node in &self.nodes {
            if let Some(mut conn) = super::run::nodes::node_conn(node).await {
                let _: i64 = conn.del(&self.keys.lock).await?;
            }
        }
        Ok(())
    }
}
