//! `stocklock lab`: every failure mode of the articles, run end to end, and
//! the teaching matrix it proves.
//!
//! The lab starts its own Redis and its own stack (`up --chaos`, two
//! instances), plays each scenario against each variant that claims
//! something of it, and judges every cell from the ledger, the answers and
//! the overlap witness, never from what a variant believes. A cell passes
//! when the observed behaviour is the claimed one *and* the evidence shows
//! the fault landed where the claim says; a cell whose fault did not land
//! is inconclusive, and fails the run like a contradiction.
//!
//! # Layout
//!
//! - [`scenario`]: the scenarios (the enum, each variant's claim), and in
//!   `scenario/play.rs` what each does to the stack and the evidence it
//!   hands its judge.
//! - [`report`]: the cells, the printed matrix and the JSON.
//! - `runner`: which cells to play, on which stack, and the report.
//! - `failover`, `orders`: the scenarios that need a stack of their own
//!   for each cell (a store that fails over; the order pipeline, with
//!   PostgreSQL).
//! - this module: what the lab is asked for, and the moves the scenarios
//!   share (a duel between two buyers, killing and restarting nodes, ...).
//!
//! Its judges are [`crate::judge`]'s, its stacks [`crate::harness`]'s.

mod args;
mod failover;
mod orders;
pub mod report;
mod runner;
pub mod scenario;

pub use self::args::LabArgs;
pub use self::failover::failover_by_store;
pub use self::runner::run;

use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use serde_json::Value;

pub use self::report::{Cell, LabReport};
pub use self::scenario::Scenario;
use crate::chaos;
use crate::client::StackClient;
use crate::harness::stack::{Instance, Stack};
use crate::judge::{Check, Duel, Ledger, Reply, said_of};
use crate::knobs::Sku;
use crate::os::signal;
use crate::said;
use crate::store::{Keys, Store};
use crate::up::redis::RedisServer;
use crate::variants::Variant;
use crate::wire::{ChaosAction, Said, StateSnapshot};

/// Each cell must finish within this.
const CELL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a holder has to announce it entered its section.
const ENTER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a dead instance has to come back.
const RESTART_TIMEOUT: Duration = Duration::from_secs(10);
/// How long every instance has to hand in its sections before a cell is
/// judged (each read of the timeline waits a second for them).
const COUNTED_IN_TIMEOUT: Duration = Duration::from_secs(10);

/// What `stocklock lab` was asked for.
#[derive(Clone, Debug)]
pub struct LabConfig {
    /// Empty: all.
    pub scenarios: Vec<Scenario>,
    /// Variant names; empty: all.
    pub variants: Vec<String>,
    pub json: Option<PathBuf>,
    /// Write each cell's timeline here, one HTML file a cell
    /// (`SCENARIO-VARIANT.html`), and name it in the cell's evidence.
    pub timelines: Option<PathBuf>,
    /// Write every cell's history (what its buyers were told) here.
    pub history: Option<PathBuf>,
    /// A running stack to use instead of starting one: its URL (nginx),
    /// which must run `up --chaos` with two instances, its admin token and
    /// its Redis.
    pub target: Option<Target>,
    /// Cells played at once, each lane on a main stack of its own (one
    /// with a target).
    pub jobs: usize,
    /// Play on the SKUs named this prefix and the variant (a classroom
    /// seat's own) instead of the variant's own SKU: only the scenarios
    /// that touch nothing but their SKU ([`Scenario::per_sku`]), on a target.
    pub sku_prefix: Option<String>,
}

/// `--target`: a running chaos-mode stack.
#[derive(Clone, Debug)]
pub struct Target {
    pub url: String,
    pub admin_token: String,
    pub redis_url: String,
}

/// Everything a scenario works with.
struct Lab {
    stack: Stack,
    /// The Redis the lab started (`None` with `--target`: then the
    /// `redis-restart` scenario is skipped).
    redis: Option<RedisServer>,
    redis_url: String,
    store: Store,
    /// Redlock nodes the lab restarted itself (they replace `up`'s).
    restarted_nodes: Vec<RedisServer>,
    /// Instances the lab has killed so far (see [`Lab::next_victim`]).
    deaths: usize,
    /// Where each cell's timeline is written (`--timelines`).
    timelines: Option<PathBuf>,
    /// The stack outlives the lab (`--target`): its pages can be linked to.
    lasts: bool,
    /// The cell being played, `SCENARIO-VARIANT`: its timeline's file name.
    cell: String,
    /// Put before a variant's name to name its SKU (`--sku-prefix`).
    prefix: String,
}

impl Lab {
    /// The SKU the lab sells `v` from: the variant's own, or a seat's.
    fn sku(&self, v: &str) -> String {
        format!("{}{v}", self.prefix)
    }

    fn instance(&self, index: usize) -> &Instance {
        &self.stack.instances[index]
    }

    /// The stack's API, through nginx.
    fn client(&self) -> &StackClient {
        &self.stack.client
    }

    async fn state(&self, sku: &str) -> anyhow::Result<StateSnapshot> {
        self.client().state(sku).await
    }

    /// The SKU's ledger and overlap witness now: its timeline, from the
    /// stack's own endpoint (`/api/timeline`), which the page draws, read
    /// again until every instance had handed in its sections: a cell is
    /// not judged on part of them.
    async fn ledger(&self, sku: &str) -> anyhow::Result<Ledger> {
        let deadline = Instant::now() + COUNTED_IN_TIMEOUT;
        let timeline = loop {
            let timeline = self.client().timeline(sku).await?;
            if timeline.counted_in {
                break timeline;
            }
            if Instant::now() >= deadline {
                anyhow::bail!(
                    "an instance did not hand in its sections of {sku} within {COUNTED_IN_TIMEOUT:?}"
                );
            }
            // A read that could not call the instances at all came back at once.
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let holder = |i: usize| {
            let s = &timeline.sections[i];
            let instance = &s.instance;
            match &s.holder {
                Some(holder) => Said::same(holder),
                None => said!("{instance} (no owner)", "{instance}(无持有者)"),
            }
        };
        Ok(Ledger {
            overlaps: timeline.overlap_count,
            overlap_example: timeline
                .overlaps
                .first()
                .map(|&(a, b)| said_of!("{} with {}", "{} 与 {}"; holder(a), holder(b))),
            timeline: self.timeline_of(sku).await?,
            sections: timeline.sections.len(),
            longest_ms: timeline
                .sections
                .iter()
                .map(|s| s.release_ns.unwrap_or(s.exit_ns).saturating_sub(s.enter_ns) / 1_000_000)
                .max()
                .unwrap_or(0),
            state: timeline.state,
        })
    }

    /// Where the cell's timeline of `sku` can be seen: the file written
    /// into `--timelines`, or the target's page (a stack of the lab's own
    /// is gone once the lab ends).
    async fn timeline_of(&self, sku: &str) -> anyhow::Result<Option<String>> {
        if let Some(dir) = &self.timelines {
            let path = dir.join(format!("{}.html", self.cell));
            let html = self.client().timeline_export(sku).await?;
            std::fs::write(&path, html)
                .with_context(|| format!("cannot write {}", path.display()))?;
            return Ok(Some(path.display().to_string()));
        }
        Ok(self.lasts.then(|| format!("/timeline?sku={sku}")))
    }

    /// [`Lab::ledger`] of the SKU `state` was read of.
    async fn ledger_of(&self, state: StateSnapshot) -> anyhow::Result<Ledger> {
        self.ledger(&state.sku).await
    }

    /// Resolves to `true` when a holder of `sku`'s lock has read the stock:
    /// inside the gap between its read and its write (announced in chaos
    /// mode); `false` when no announcement came within [`ENTER_TIMEOUT`].
    async fn section_entered(
        &self,
        sku: &str,
    ) -> anyhow::Result<impl Future<Output = bool> + use<>> {
        let client = redis::Client::open(self.redis_url.as_str())?;
        let mut events = client.get_async_pubsub().await?;
        events
            .subscribe(chaos::section_channel(&Keys::new(&Sku::parse(sku)?)))
            .await?;
        Ok(async move {
            let mut stream = events.into_on_message();
            matches!(
                tokio::time::timeout(ENTER_TIMEOUT, stream.next()).await,
                Ok(Some(_))
            )
        })
    }

    /// A GET of `base` + `path` (an instance or nginx), in the background.
    /// `n` buyers at once through nginx with the same `path`; their replies.
    async fn crowd(&self, n: usize, path: &str) -> anyhow::Result<Vec<Reply>> {
        let buyers: Vec<_> = (0..n).map(|_| self.send(&self.stack.url, path)).collect();
        let mut replies = Vec::with_capacity(n);
        for buyer in buyers {
            replies.push(buyer.await?);
        }
        Ok(replies)
    }

    fn send(&self, base: &str, path: &str) -> tokio::task::JoinHandle<Reply> {
        let (client, path) = (self.client().at(base), path.to_owned());
        tokio::spawn(async move { Reply::from(client.deduct(&path).await) })
    }

    /// A holder on instance a; once it is inside its section (and after
    /// `strike`, a chaos action, if any), a newcomer on instance b. Both
    /// answers, the ledger after them, and the strike's answer.
    async fn duel(
        &self,
        sku: &str,
        holder: &str,
        newcomer: &str,
        strike: Option<ChaosAction>,
    ) -> anyhow::Result<(Duel, Value)> {
        let entered = self.section_entered(sku).await?;
        let first = self.send(&self.instance(0).url, holder);
        let entered = entered.await;
        // Struck on instance b: through nginx it could reach a frozen
        // holder's instance and wait, unseen, until the holder is done.
        let struck = match strike {
            Some(action) => self.chaos_on(1, &action).await?,
            None => Value::Null,
        };
        let newcomer = self.send(&self.instance(1).url, newcomer).await?;
        let duel = Duel {
            entered,
            holder: first.await?,
            newcomer,
            ledger: self.ledger(sku).await?,
        };
        Ok((duel, struck))
    }

    /// A chaos action sent to one instance's own URL (not through nginx),
    /// for the actions that change only the instance that takes them.
    async fn chaos_on(&self, index: usize, action: &ChaosAction) -> anyhow::Result<Value> {
        self.client()
            .at(&self.instance(index).url)
            .chaos(action)
            .await
            .with_context(|| format!("chaos on instance {}", self.instance(index).name))
    }

    /// Pauses the lab's Redis for `pause`: see [`pause_redis`].
    async fn pause_redis(
        &self,
        pause: Duration,
    ) -> anyhow::Result<(Check, crate::harness::pause::Probe)> {
        crate::harness::pause::pause_redis(&self.redis_url, &self.store, pause, "the lab").await
    }

    /// The instance a recovery scenario kills next, and the other one.
    /// They take turns: `up` backs off longer each time an instance dies
    /// young, and one instance killed in every cell would soon wait longer
    /// to come back than a cell lasts.
    fn next_victim(&mut self) -> (Instance, Instance) {
        let victim = self.deaths % 2;
        self.deaths += 1;
        (
            self.instance(victim).clone(),
            self.instance(1 - victim).clone(),
        )
    }

    /// The pid `victim` was restarted as, once `up` (or, attached, the
    /// board) shows it back; `None` if it did not come back.
    async fn restarted(&mut self, victim: &Instance) -> Option<u32> {
        self.stack.restarted(victim, RESTART_TIMEOUT).await
    }

    /// Kills Redlock nodes (SIGKILL, by index from 0) and waits until their
    /// ports refuse connections; why not, if one still answers.
    async fn kill_nodes(&self, which: &[usize]) -> Check {
        for &i in which {
            let node = self
                .stack
                .redlock_nodes
                .get(i)
                .ok_or_else(|| said!("no such Redlock node", "没有这个 Redlock 节点"))?;
            signal(node.pid, nix::sys::signal::Signal::SIGKILL);
        }
        for &i in which {
            let port = self.stack.redlock_nodes[i].port().ok_or_else(|| {
                said!(
                    "a Redlock node without a port",
                    "一个没有端口的 Redlock 节点"
                )
            })?;
            if !crate::os::until_closed(port, Duration::from_secs(5)).await {
                let node = i + 1;
                return Err(said!(
                    "Redlock node {node} still answers after SIGKILL",
                    "SIGKILL 之后 Redlock 节点 {node} 仍在应答"
                ));
            }
        }
        Ok(())
    }

    /// Starts empty redis-servers on the ports of Redlock nodes (a restart
    /// without persistence); the lab owns and stops them.
    async fn restart_nodes(&mut self, which: &[usize]) -> anyhow::Result<()> {
        for &i in which {
            let port = self.stack.redlock_nodes[i]
                .port()
                .context("a node's port")?;
            let server = RedisServer::start(Some(port)).await?;
            self.stack.redlock_nodes[i].pid = server.pid().unwrap_or(0);
            self.restarted_nodes.push(server);
        }
        Ok(())
    }

    /// Why this stack cannot play `scenario` against `variant`, if it cannot.
    fn cannot_play(&self, scenario: Scenario, variant: Variant) -> Option<&'static str> {
        let redlock_scenario = matches!(
            scenario,
            Scenario::RedlockMinorityDown
                | Scenario::RedlockMajorityDown
                | Scenario::RedlockRestartWithoutPersistence
        );
        // A stack the lab started says whether it has PostgreSQL; one it
        // was pointed at (`--target`) is asked: its instances answer 503
        // if they have none.
        if variant.stock_in_postgres() && self.stack.postgres.is_none() && !self.lasts {
            Some("its stock is in PostgreSQL, which this stack has not (install postgresql)")
        } else if scenario == Scenario::PostgresRestart && self.stack.postgres.is_none() {
            Some("the lab can only crash a PostgreSQL its stack's `up` started (and starts again)")
        } else if scenario == Scenario::RedisRestart && self.redis.is_none() {
            Some("the lab can only restart a Redis it started")
        } else if redlock_scenario
            && variant == Variant::Redlock
            && self.stack.redlock_nodes.len() != 5
        {
            Some("it kills and restarts the five Redlock nodes of a stack the lab started")
        } else {
            None
        }
    }

    /// Undoes what a cell may have left behind, whether it ended well, in
    /// an error or in a timeout: faults armed and never triggered; in
    /// `clock-skew`, instance b's clock.
    async fn tidy(&self, scenario: Scenario) {
        if let Ok(mut conn) = self.store.conn().await {
            let _ = chaos::disarm(&mut conn).await;
        }
        if scenario == Scenario::ClockSkew
            && let Err(err) = self.chaos_on(1, &ChaosAction::ClockSkew { ms: 0 }).await
        {
            eprintln!("lab: cannot set instance b's clock back: {err:#}");
        }
    }
}
