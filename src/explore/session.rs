//! One schedule as a session of steps: its buyers sent, then, step by
//! step, what may happen now ([`Session::next`]) and the step someone
//! chose ([`Session::take`]), then the ledger's verdict
//! ([`Session::finish`]). The explorer chooses by its strategy; step mode
//! lets a learner choose.

use std::time::Instant;

use anyhow::{Context, bail};

use super::run::{Buyer, Run, name};
use super::strike::Budget;
use super::{BUYERS, Choice, LEASE_MS, STALL, STOCK};
use crate::check::model::Bounds;
use crate::client::StackClient;
use crate::history::Recorder;

mod after;
mod finish;
mod start;
use crate::variants::{Scenario, Variant};

/// Where a session runs: its run's name (its gates' and its request ids'),
/// its SKU, and its buyers' lease where no fault needs a short one.
#[derive(Clone, Debug)]
pub struct Setup {
    pub run_id: String,
    pub sku: String,
    pub lease_ms: u64,
    /// How many buyers (A, B, ...): the checker's three, or fewer.
    pub buyers: u8,
}

impl Setup {
    /// The explorer's: seed `seed` of the cell (its run named by both, so
    /// that `--all`'s histories name each cell's SKUs apart).
    pub fn explore(variant: Variant, scenario: Scenario, seed: u64) -> Setup {
        Setup {
            run_id: format!("explore-{variant}-{scenario}-{seed}"),
            sku: format!("x-{variant}"),
            lease_ms: LEASE_MS,
            buyers: BUYERS,
        }
    }
}

/// What may happen now: the buyers' steps (a gate's release, a retry) and
/// the rest (the scenario's faults, the order pipeline's steps).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub releases: Vec<Choice>,
    pub faults: Vec<Choice>,
}

impl Options {
    /// Whether `choice` is offered.
    pub fn offers(&self, choice: &Choice) -> bool {
        self.releases.contains(choice) || self.faults.contains(choice)
    }
}

/// One schedule under way.
pub struct Session<'a> {
    pub(super) run: Run<'a>,
    variant: Variant,
    bounds: Bounds,
    budget: Budget,
    pub(super) setup: Setup,
    /// The instance whose clock runs ahead, and how far per lease tick.
    skewed: Option<StackClient>,
    lease_ms: u64,
    pub(super) steps: Vec<Choice>,
    progress: Instant,
    /// A stall names the schedule by its seed (0 outside the explorer).
    seed: u64,
    /// What its buyers were told, for the history checker.
    recorder: Recorder,
    /// The cell's claim admits under-selling (a buyer told "sold out"
    /// while stock remained is what it expects).
    undersells: bool,
    /// The cell's claim, judged once the schedule is over.
    claim: crate::variants::Behaviour,
    /// `busy`: the buyers' answers judged as a node came back, ending the
    /// fault (`None` until then).
    refused: Option<Option<crate::wire::Said>>,
}

impl<'a> Session<'a> {
    /// Retries of one purchase: every buyer sends the same request id.
    /// Where calls are cut off, each buyer has its own (it asks again); so
    /// does each buyer of an order variant (its order is found by it).
    fn request_id(&self, n: u8) -> Option<String> {
        let own = self.bounds.cutoffs > 0 || self.variant.orders();
        match (self.bounds.one_request, own) {
            (true, _) => Some(self.setup.run_id.clone()),
            (false, true) => Some(format!("{}-{}", self.setup.run_id, name(n))),
            (false, false) => None,
        }
    }

    fn skew(&self, ticks: u8) -> crate::wire::ChaosAction {
        crate::wire::ChaosAction::ClockSkew {
            ms: i64::from(ticks) * self.lease_ms as i64 / i64::from(self.bounds.lease.max(1)),
        }
    }

    /// The steps taken so far.
    pub fn steps(&self) -> &[Choice] {
        &self.steps
    }

    /// Waits until every buyer waits at a gate, has answered, or waits for
    /// a lock, then says what may happen now; `None` once the schedule is
    /// over (every buyer answered or dead, the pipeline at rest).
    pub async fn next(&mut self) -> anyhow::Result<Option<Options>> {
        loop {
            // (A stall names its schedule, to be played again by its seed.)
            let (seed, steps) = (self.seed, &self.steps);
            let settled = self.run.settle().await;
            settled.with_context(|| format!("seed {seed}; steps {steps:?}"))?;
            let run = &mut self.run;
            let waiting: Vec<u8> = (0..run.count)
                .filter(|n| matches!(run.buyers.get(n), Some(Buyer::Waiting(..))))
                .collect();
            let lock = run.lock().await?;
            // Each buyer's gate, each Redlock vote held, and each buyer
            // told `unknown` asking again.
            let mut releases = run.releases();
            releases.extend(run.retries());
            releases.extend(run.asking_again());
            let down = match self.bounds.restarts > 0 {
                true => run.nodes_down().await?,
                false => Vec::new(),
            };
            let mut faults = run.offered(&waiting, (lock, &down), &self.budget, self.variant);
            if self.budget.claim_expiries > 0 && run.claim_may_run_out(&waiting).await? {
                faults.push(Choice::ClaimRunsOut);
            }
            // The order pipeline's steps (chosen as faults are) and faults.
            let (flow, more) = run.pipeline_steps().await?;
            faults.extend(flow.iter().cloned().chain(more));
            let pending = run.buyers.values().any(|b| matches!(b, Buyer::Sent(_)));
            if releases.is_empty() && flow.is_empty() && !pending {
                return Ok(None);
            }
            if releases.is_empty() && faults.is_empty() {
                if self.progress.elapsed() > STALL {
                    bail!(
                        "no buyer reached a gate or answered within {STALL:?} (seed {}; {}; steps {:?})",
                        self.seed,
                        run.whereabouts(),
                        self.steps
                    );
                }
                continue;
            }
            return Ok(Some(Options { releases, faults }));
        }
    }

    /// Takes `choice`, one of those [`Session::next`] offered.
    pub async fn take(&mut self, choice: Choice) -> anyhow::Result<()> {
        // `busy`: a node coming back may end the fault; what the buyers
        // were told until then is judged now.
        if let Choice::NodeRestart { .. } = choice
            && self.claim == crate::variants::Behaviour::Busy
            && self.refused.is_none()
        {
            self.refused = Some(self.refusals());
        }
        let run = &mut self.run;
        match &choice {
            Choice::Release { buyer, gate } => {
                let n = super::index(buyer);
                if run.frozen.contains(&n) {
                    // (etcd's and ZooKeeper's renewals pass no gate.)
                    let renews = self.budget.watchdog && run.elsewhere.is_none();
                    run.wake_up(n, renews).await?;
                }
                match run.held_vote(n, gate) {
                    Some(vote) => run.release_vote(vote).await?,
                    None => run.release(n).await?,
                }
            }
            Choice::Retry { buyer } => {
                let n = super::index(buyer);
                if run.claim_ran_out {
                    run.asked_again.insert(n);
                }
                run.send(n).await?
            }
            // Redis back empty (restarted, or its data lost), the SKU
            // stocked again: for the history, the units sold so far come
            // back (one stock across the restart: a buyer in flight may
            // sell in either epoch).
            Choice::Restart | Choice::DataLoss => {
                let sku = self.setup.sku.clone();
                let call = self.recorder.now();
                let left = run.stack.client.state(&sku).await?.remaining;
                run.strike(&choice, &mut self.budget, self.variant, &sku)
                    .await?;
                for unit in left.max(0) + 1..=STOCK {
                    self.recorder.returned(&sku, call, unit);
                }
            }
            fault => {
                // Dead: whatever it is told once let go at the end is told
                // to nobody.
                if let Choice::Crash { buyer } = fault {
                    (self.recorder).silence(&format!("schedule={}:{buyer}", self.setup.run_id));
                }
                let sku = self.setup.sku.clone();
                run.strike(fault, &mut self.budget, self.variant, &sku)
                    .await?
            }
        }
        self.steps.push(choice);
        self.progress = Instant::now();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    /// `explore --all` writes every cell's histories into one file: each
    /// cell's schedules must name their SKUs apart (one variant, one seed,
    /// two scenarios once declared one SKU twice).
    #[test]
    fn every_cell_and_seed_names_its_run_apart() {
        let mut seen = HashSet::new();
        for variant in Variant::ALL {
            for scenario in Scenario::ALL {
                for seed in 1..=3 {
                    let run = Setup::explore(variant, scenario, seed).run_id;
                    assert!(seen.insert(run.clone()), "{run} named twice");
                }
            }
        }
    }
}
