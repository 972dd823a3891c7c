//! `stocklock replay`: the checker's shortest counterexample of one cell,
//! driven step for step through the real code on a live stack.
//!
//! Each model buyer (A, B, C) is one scheduled request on an instance of
//! its own ([`crate::gate`]). A model step of a buyer lets it go from the
//! gate that stands for where the model has it, and waits for it at the
//! gate that stands for where the model's step takes it (or for its
//! answer, when the model's buyer is done). Steps that happen inside one
//! stretch of the real code with no gate between them (`setnx-expiry`'s
//! GET and GETSET) pass without a release. A tick on which the model's
//! lease runs out waits until the live lock is gone (real time: replays
//! use a short lease); a deleted lock is deleted live; a crash is a buyer
//! never let go again (its lock as a dead holder leaves it: a Redis lock
//! cannot tell the difference). A failover kills the master of a
//! replicated Redis (`failover.rs`); the gates then meet on a Redis apart.
//! At the end the live ledger is read and judged against the property the
//! model's trace breaks.

use std::collections::HashMap;

use anyhow::{Context, bail};
use redis::AsyncCommands;

use crate::check::model::{Action, At, Pc, Sale, World, setnx};
use crate::check::order::OrderStep;
use crate::check::{self, Property, Verdict};
use crate::gate::Scheduler;
use crate::history::Recorder;
use crate::knobs::Sku;
use crate::store::{Keys, Store};
use crate::wire::ChaosAction;

use crate::harness::stack::Stack;

mod all;
mod cli;
mod failing;
mod failover;
mod live;
pub(super) mod orders;
mod redlock;
mod stacks;

pub use cli::{ReplayArgs, replay, run};
pub(crate) use live::sold_twice;
pub use stacks::{Beside, stack_for, start, start_failover, start_orders};

use live::{Live, judge, name};

/// The shortest live lease of a replay that restarts Redlock nodes.
const NODE_RESTART_LEASE_MS: u64 = 3_000;

/// Where a buyer at `pc` waits live: its gate, or `None` for a model
/// step inside a stretch of code with no gate; `Err` for what the gates
/// cannot stand for yet.
pub(crate) fn gate_of(pc: Pc) -> Result<Option<&'static str>, String> {
    Ok(Some(match pc.at() {
        At::Start => "before_acquire",
        At::Held if pc == setnx::Pc::Expire.into() => "after_setnx",
        At::Held => "before_wait",
        At::Taking => return Ok(None),
        At::Read => "after_acquire",
        At::Work => "after_read",
        At::Check => "before_check",
        At::Write => "before_write",
        At::Release => "before_release",
        At::After => "before_enqueue",
        At::Done => "after_release",
        other => return Err(format!("a buyer {}", describe_at(other))),
    }))
}

fn describe_at(at: At) -> &'static str {
    match at {
        At::Claim => "claiming its request id",
        At::Round => "in a Redlock round",
        At::After => "adding its order after its script",
        At::Retry => "retrying a cut-off call",
        _ => "here",
    }
}

/// A Redlock buyer's place in its round (from its first vote to its
/// count), which `redlock.rs` plays; `None` for any other place.
fn round(pc: Pc) -> Option<check::model::redlock::Pc> {
    use check::model::redlock::Pc as Redlock;
    match pc {
        Pc::Redlock(p @ (Redlock::Acquire | Redlock::Vote | Redlock::Count)) => Some(p),
        _ => None,
    }
}

/// Why the cell cannot be replayed yet (`None`: it can).
pub fn unsupported(verdict: &Verdict) -> Option<String> {
    let Some(property) = verdict.broken else {
        return Some(format!(
            "{} in {} is {}: no counterexample to replay",
            verdict.variant, verdict.scenario, verdict.model
        ));
    };
    if !matches!(
        property,
        Property::Safety | Property::Stuck | Property::OrdersKept
    ) {
        return Some(format!(
            "its broken property ({}) is not judged live yet",
            property.name()
        ));
    }
    let Some((_, worlds)) = check::draw::replay(verdict) else {
        return Some("its trace does not replay in the model".to_owned());
    };
    for (k, step) in verdict.trace.iter().enumerate() {
        match step.action {
            Action::Step(n) => {
                for world in [&worlds[k], &worlds[k + 1]] {
                    let pc = world.buyers[usize::from(n)].pc;
                    if round(pc).is_some() {
                        continue;
                    }
                    if let Err(why) = gate_of(pc) {
                        return Some(format!("step {}: {why}", k + 1));
                    }
                }
            }
            Action::Tick
            | Action::LateTick(_)
            | Action::Crash(_)
            | Action::Freeze(_)
            | Action::Vanish
            | Action::Restart(_)
            | Action::HoldReplication
            | Action::Failover
            | Action::Order(OrderStep::DataLoss) => {}
            other => {
                return Some(format!(
                    "step {}: {other:?} is not played by replays yet",
                    k + 1
                ));
            }
        }
    }
    None
}

/// One replayed step: the model's words and what the live run showed.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Played {
    pub model: String,
    pub live: String,
}

/// A replay's result.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Replay {
    pub variant: &'static str,
    pub scenario: &'static str,
    /// The property the model's counterexample breaks.
    pub property: &'static str,
    pub steps: Vec<Played>,
    /// What the live ledger shows at the end.
    pub live: String,
    /// Whether the live run broke the same property.
    pub agrees: bool,
    /// The history checker's verdict of what the buyers were told.
    pub history: String,
    /// Set when it and the live ledger's verdict disagree on safety.
    pub disagreement: Option<String>,
    /// The history itself (`--history`), JSON Lines.
    #[serde(skip)]
    pub recorded: String,
}

/// Whether `verdict`'s cell plays the order pipeline: its replay needs a
/// stack with the orders on and the Redis `up` started (a data loss
/// restarts it).
pub fn needs_orders(verdict: &Verdict) -> bool {
    check::draw::replay(verdict).is_some_and(|(sale, _)| sale.bounds.orders.is_some())
}

/// Whether `verdict`'s cell kills or restarts Redlock nodes: its replay
/// needs a stack of its own (the nodes it started again stop with it).
pub fn kills_nodes(verdict: &Verdict) -> bool {
    check::draw::replay(verdict)
        .is_some_and(|(sale, _)| sale.bounds.nodes_down > 0 || sale.bounds.restarts > 0)
}

/// Whether `verdict`'s cell fails the lock's Redis over: its replay needs
/// a stack of its own ([`start_failover`]).
pub fn fails_over(verdict: &Verdict) -> bool {
    check::draw::replay(verdict).is_some_and(|(sale, _)| sale.bounds.failovers > 0)
}

/// The SKU a replay of `verdict` sells.
fn sku_of(verdict: &Verdict) -> String {
    format!("{}-{}", verdict.variant, verdict.scenario)
}

/// Replays `verdict`'s counterexample on `stack` (from [`start`]), whose
/// Redis is at `redis_url` and whose gates meet on the Redis at
/// `gates_url` (the same, but for a failover cell's stack:
/// [`start_failover`]), on a SKU and a run of its own.
pub async fn replay_on(
    stack: &Stack,
    redis_url: &str,
    gates_url: &str,
    verdict: &Verdict,
    lease_ms: u64,
) -> anyhow::Result<Replay> {
    if let Some(why) = unsupported(verdict) {
        bail!(
            "cannot replay {} in {}: {why}",
            verdict.variant,
            verdict.scenario
        );
    }
    let (sale, worlds) = check::draw::replay(verdict).context("the trace does not replay")?;
    let property = verdict.broken.context("no counterexample")?;
    let at = Place {
        stack,
        redis_url,
        gates_url,
    };
    play(verdict, &sale, &worlds, property, at, lease_ms).await
}

/// Where a replay plays: the stack, its Redis, the Redis its gates meet on.
#[derive(Clone, Copy)]
struct Place<'a> {
    stack: &'a Stack,
    redis_url: &'a str,
    gates_url: &'a str,
}

async fn play(
    verdict: &Verdict,
    sale: &Sale,
    worlds: &[World],
    property: Property,
    at: Place<'_>,
    lease_ms: u64,
) -> anyhow::Result<Replay> {
    let Place {
        stack,
        redis_url,
        gates_url,
    } = at;
    let sku = sku_of(verdict);
    // Restarting a node takes real time (a kill, a new redis-server) that
    // the model's steps do not: a lease long beside it keeps a round's
    // validity from running out where the model's time stands still.
    let lease_ms = match (sale.bounds.restarts > 0, sale.bounds.failovers > 0) {
        (_, true) => lease_ms.max(failing::LEASE_MS),
        (true, _) => lease_ms.max(NODE_RESTART_LEASE_MS),
        _ => lease_ms,
    };
    let failing = match sale.bounds.failovers > 0 {
        true => Some(failing::Failing::of(stack, redis_url)?),
        false => None,
    };
    let nodes = usize::from(sale.bounds.nodes);
    if nodes > 0 && stack.redlock_nodes.len() != nodes {
        bail!(
            "the model asks {nodes} Redlock nodes and the stack has {}: replay Redlock on a stack with up --redlock {nodes}",
            stack.redlock_nodes.len()
        );
    }
    let run = format!("replay-{}-{}", verdict.variant, verdict.scenario);
    let recorder = Recorder::prefixed(&format!("{run}/"));
    (stack.client)
        .recording(recorder.clone())
        .reset(&sku, i64::from(sale.bounds.stock), 0)
        .await?;
    let mut live = Live {
        variant: verdict.variant,
        sale,
        stack,
        store: Store::open(redis_url)?,
        keys: Keys::new(&Sku::parse(&sku)?),
        sku,
        scheduler: Scheduler::start(gates_url, &run).await?,
        run,
        redis_url: redis_url.to_owned(),
        orders: sale.bounds.orders.is_some(),
        lease_ms,
        heard: HashMap::new(),
        renewals: HashMap::new(),
        requests: HashMap::new(),
        answers: HashMap::new(),
        votes: HashMap::new(),
        voted: HashMap::new(),
        rounds: HashMap::new(),
        restarted: HashMap::new(),
        failing,
        recorder,
    };
    // The last buyer's clock runs ahead by the model's skew, in the live
    // lease's ticks (its instance's own clock, as chaos mode skews it).
    let skewed = stack
        .client
        .at(&stack.instances[usize::from(sale.bounds.buyers - 1) % stack.instances.len()].url);
    let skew = |ticks: u8| ChaosAction::ClockSkew {
        ms: i64::from(ticks) * lease_ms as i64 / i64::from(sale.bounds.lease.max(1)),
    };
    if sale.bounds.skew > 0 {
        skewed.chaos(&skew(sale.bounds.skew)).await?;
    }
    let mut steps = Vec::new();
    let mut crashed = Vec::new();
    let outcome = async {
        if live.orders {
            live.hold_workers().await?;
        }
        // Redlock: the nodes the model has down from the start.
        for k in nodes - usize::from(sale.bounds.nodes_down)..nodes {
            live.node_down(k).await?;
        }
        for (k, step) in verdict.trace.iter().enumerate() {
            let (before, after) = (&worlds[k], &worlds[k + 1]);
            let said = match step.action {
                Action::Step(n) => {
                    let (from, to) = (
                        before.buyers[usize::from(n)].pc,
                        after.buyers[usize::from(n)].pc,
                    );
                    if !live.requests.contains_key(&n) && !live.answers.contains_key(&n) {
                        live.send(n);
                    }
                    if let (Some(from), Some(to)) = (
                        round(from),
                        round(to).or(match to {
                            Pc::Redlock(to) => Some(to),
                            _ => None,
                        }),
                    ) {
                        live.redlock_step(n, from, to, before).await?
                    } else {
                        let mut said = Vec::new();
                        if let Some(gate) = gate_of(from).map_err(anyhow::Error::msg)? {
                            live.reach(n, gate).await?;
                            let arrival = live.heard.remove(&n).context("no arrival")?;
                            live.scheduler.release(&arrival).await?;
                            said.push(format!("{} goes on from {gate}", name(n)));
                        }
                        match gate_of(to).map_err(anyhow::Error::msg)? {
                            Some("after_release") => said.push(live.finish_through(n).await?),
                            Some(gate) => {
                                let passed = live.reach(n, gate).await?;
                                said.push(match passed.is_empty() {
                                    true => format!("now at {gate}"),
                                    false => {
                                        format!("through {}, now at {gate}", passed.join(", "))
                                    }
                                });
                            }
                            None => {}
                        }
                        said.join("; ")
                    }
                }
                Action::Tick | Action::LateTick(_) => {
                    let mut said = Vec::new();
                    if before.lock.is_some() && after.lock.is_none() {
                        said.push(live.lock_gone().await?);
                    }
                    // Redlock: each node's lease that runs out.
                    for (k, (was, now)) in before.nodes.iter().zip(&after.nodes).enumerate() {
                        if was.lock.is_some() && now.lock.is_none() && now.up {
                            said.push(live.node_lock_gone(k).await?);
                        }
                    }
                    // setnx-expiry's lock has no TTL: the time in its value passes.
                    if before
                        .lock
                        .is_some_and(|lock| lock.value > 0 && lock.value == before.now)
                    {
                        said.push(live.expiry_passed().await?);
                    }
                    // The watchdogs the model's tick renews, or that find their lock gone.
                    for (i, (was, now)) in before.buyers.iter().zip(&after.buyers).enumerate() {
                        if (now.renewed == after.now && was.renewed != after.now)
                            || (!was.lost && now.lost)
                        {
                            said.push(live.renew(i as u8).await?);
                        }
                    }
                    match said.is_empty() {
                        true => "time passes".to_owned(),
                        false => said.join("; "),
                    }
                }
                Action::Crash(n) => {
                    crashed.push(n);
                    format!(
                        "{} is never let go again: its process is as good as dead",
                        name(n)
                    )
                }
                Action::Freeze(n) => format!("{} is held where it is", name(n)),
                Action::Vanish => {
                    let mut conn = live.store.conn().await?;
                    let _: i64 = conn.del(&live.keys.lock).await?;
                    "the lock key is deleted".to_owned()
                }
                Action::Order(OrderStep::DataLoss) => live.lose_redis_data().await?,
                Action::HoldReplication => live.hold_replication().await?,
                Action::Failover => live.fail_over().await?,
                Action::Restart(k) => {
                    let was_up = before.nodes[usize::from(k)].up;
                    live.node_restart(usize::from(k), was_up).await?
                }
                other => bail!("{other:?} is not played by replays"),
            };
            steps.push(Played {
                model: step.text.clone(),
                live: said,
            });
        }
        anyhow::Ok(())
    }
    .await;
    let judged = judge(&mut live, property, &crashed).await;
    if sale.bounds.skew > 0 {
        skewed.chaos(&skew(0)).await?;
    }
    // Whatever happened, nobody stays held.
    live.scheduler.abandon().await?;
    for (_, request) in live.requests.drain() {
        let _ = request.await;
    }
    outcome?;
    let (live_said, agrees) = judged?;
    let second = live.second_opinion(property, agrees).await?;
    Ok(Replay {
        variant: verdict.variant,
        scenario: verdict.scenario,
        property: property.name(),
        steps,
        live: live_said,
        agrees,
        history: second.summary,
        disagreement: second.disagreement,
        recorded: live.recorder.text(),
    })
}
