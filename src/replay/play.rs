//! One counterexample played on a stack: the live buyers set up, each
//! model step played at the gates, the ledger judged and the history
//! checker asked for its second opinion.

use std::collections::HashMap;

use anyhow::{Context, bail};
use redis::AsyncCommands;

use super::live::{Live, name};
use super::verdict::judge;
use super::{NODE_RESTART_LEASE_MS, Played, Replay, failing, gate_of, round, sku_of, unsupported};
use crate::check::model::{Action, Pc, Sale, World};
use crate::check::order::OrderStep;
use crate::check::{self, Property, Verdict};
use crate::gate::Scheduler;
use crate::harness::stack::Stack;
use crate::history::Recorder;
use crate::knobs::Sku;
use crate::store::{Keys, Store};
use crate::wire::ChaosAction;

/// Replays `verdict`'s counterexample on `stack` (from [`super::start`]), whose
/// Redis is at `redis_url` and whose gates meet on the Redis at
/// `gates_url` (the same, but for a failover cell's stack:
/// [`super::start_failover`]), on a SKU and a run of its own.
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
        history: second.summary.en,
        disagreement: second.disagreement.map(|why| why.en),
        recorded: live.recorder.text(),
    })
}
