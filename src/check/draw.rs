//! A counterexample drawn as the timeline draws a live run: one lane per
//! buyer (A, B, C as instances), each buyer's critical section from the
//! moment it holds the lock (or reads, with no lock) to its write, its
//! lease and its watchdog's renewals, and the faults as chaos events.
//!
//! The model's time is ticks, and any number of steps happen within one
//! tick; the drawing gives every step [`STEP_MS`] and every tick room for
//! the busiest tick's steps, so that leases end on tick boundaries.

use std::str::FromStr;

use super::model::{Action, At, Sale, World, script};
use super::order::OrderStep;
use super::protocol::Protocol;
use super::{Property, Verdict, describe};
use crate::timeline::{Event, MAX_PAIRS, Section, Timeline, overlap_count, overlaps};
use crate::variants::Variant;
use crate::wire::StateSnapshot;

/// How long one step of a trace is drawn.
pub const STEP_MS: u64 = 50;
const MS: u64 = 1_000_000;

/// The states a verdict's schedule (its counterexample, or its witness)
/// goes through, from the first.
pub fn replay(verdict: &Verdict) -> Option<(Sale, Vec<World>)> {
    let variant = Variant::from_str(verdict.variant).ok()?;
    let (property, schedule) = verdict.schedule()?;
    let sale = Sale {
        protocol: Protocol::of(variant),
        bounds: verdict.bounds,
        mutation: Default::default(),
        property,
    };
    let mut worlds = vec![sale.initial()];
    for step in schedule {
        let next = sale.next(worlds.last()?, step.action)?;
        worlds.push(next);
    }
    Some((sale, worlds))
}

/// Whether `w`'s lock has a lease yet (`setnx`'s has none before its
/// EXPIRE; `setnx-expiry`'s is the time in its value).
fn leased(w: &World) -> bool {
    w.lock
        .is_none_or(|lock| lock.expires.is_some() || lock.value > 0)
}

/// The schedule of `verdict` (its counterexample, or its witness) as a
/// timeline (`None`: a vacuous cell, nothing to draw).
pub fn timeline(verdict: &Verdict) -> Option<Timeline> {
    let (_, schedule) = verdict.schedule()?;
    let (sale, worlds) = replay(verdict)?;
    let actions: Vec<Action> = schedule.iter().map(|s| s.action).collect();
    let at = clock(&actions);
    let tick_ns = tick_len(&actions) * MS;
    let name = |n: usize| char::from(b'A' + n as u8).to_string();
    let lease_ms = match sale.protocol.leased() {
        true => Some(u64::from(sale.bounds.lease) * tick_ns / MS),
        false => None,
    };
    let mut sections: Vec<Section> = Vec::new();
    // The section each buyer is in, by index into `sections`.
    let mut open: Vec<Option<usize>> = vec![None; usize::from(sale.bounds.buyers)];
    // A sale of one script (or statement): the database's transactions
    // count their ids' sales too, and are drawn as sections.
    let scripted = |before: &World, after: &World, n: u8| {
        sale.protocol.program == super::protocol::Program::Script && script::sold(before, after, n)
    };
    let mut events = Vec::new();
    for (k, action) in actions.iter().enumerate() {
        let (before, after, t) = (&worlds[k], &worlds[k + 1], at[k]);
        let event = |kind: &str, who: Option<usize>| {
            let said = describe(&sale, before, *action, after);
            Event {
                at_ns: t,
                kind: kind.to_owned(),
                instance: who.map(name),
                sku: None,
                detail: said.en,
                detail_zh: Some(said.zh),
            }
        };
        match *action {
            Action::Crash(n) => {
                events.push(event("crash", Some(usize::from(n))));
                // Its section ends here, its outcome unknown.
                if let Some(i) = open[usize::from(n)] {
                    sections[i].exit_ns = t;
                }
            }
            Action::Freeze(n) => events.push(event("freeze", Some(usize::from(n)))),
            Action::Vanish => events.push(event("lock_vanishes", None)),
            Action::Restart(_) => events.push(event("node_restart", None)),
            Action::HoldReplication => events.push(event("replication_held", None)),
            Action::Failover => events.push(event("failover", None)),
            Action::RedisDown => events.push(event("redis_down", None)),
            Action::RedisBack => events.push(event("redis_back", None)),
            Action::CutOff(n) => events.push(event("cut_off", Some(usize::from(n)))),
            Action::DatabaseCrash(_) | Action::AnswerLost(_) => {
                let (kind, lost) = match *action {
                    Action::AnswerLost(n) => ("answer_lost", Some(n)),
                    Action::DatabaseCrash(lost) => ("postgres_crash", lost),
                    _ => ("", None),
                };
                events.push(event(kind, lost.map(usize::from)));
                if let Some(n) = lost
                    && scripted(before, after, n)
                {
                    // A statement that committed: its sale, one moment.
                    let n = usize::from(n);
                    let mut section = Section::timed(&name(n), None, t, "sold");
                    section.exit_ns = t;
                    section.unit = Some(i64::from(after.buyers[n].read));
                    section.atomic = true;
                    sections.push(section);
                }
                // The transactions it ended: committed (its answer lost), or
                // rolled back by a crash.
                for (n, slot) in open.iter_mut().enumerate() {
                    if let Some(i) = slot.take_if(|_| !after.buyers[n].pc.at().inside()) {
                        let section = &mut sections[i];
                        section.exit_ns = t;
                        section.release_ns = Some(t);
                        if after.sold != before.sold && lost == Some(n as u8) {
                            section.outcome = "sold".into();
                            section.unit = Some(i64::from(before.buyers[n].read));
                        } else {
                            section.reason = Some("rolled_back".to_owned());
                        }
                    }
                }
            }
            Action::Order(step) => {
                let kind = match step {
                    OrderStep::WorkerCrash => "worker_crash",
                    OrderStep::PostgresStop => "postgres_down",
                    OrderStep::PostgresStart => "postgres_up",
                    OrderStep::DataLoss => "redis_data_loss",
                    _ => "order",
                };
                events.push(event(kind, None));
            }
            Action::Tick | Action::LateTick(_) => {
                for (n, section) in open.iter().enumerate() {
                    let (was, now) = (&before.buyers[n], &after.buyers[n]);
                    if let Some(i) = section
                        && sale.protocol.watchdog()
                        && now.renewed == after.now
                        && now.live()
                        && now.pc.at().inside()
                    {
                        sections[*i].renewals_ns.push(t);
                    }
                    if !was.lost && now.lost {
                        events.push(event("lock_lost", Some(n)));
                    }
                }
            }
            Action::Step(n) | Action::Deliver(n) => {
                let n = usize::from(n);
                let (was, now) = (&before.buyers[n], &after.buyers[n]);
                if scripted(before, after, n as u8) {
                    // The lua family's sale, one script.
                    let mut section = Section::timed(&name(n), None, t, "sold");
                    section.exit_ns = t;
                    section.unit = Some(i64::from(now.read));
                    section.atomic = true;
                    sections.push(section);
                }
                let (at, next) = (was.pc.at(), now.pc.at());
                if !at.inside() && next.inside() {
                    let mut section = Section::timed(&name(n), Some(&name(n)), t, "busy");
                    section.exit_ns = t;
                    // setnx's lock has no lease until its EXPIRE.
                    if leased(after) {
                        section.lease_ms = lease_ms;
                    }
                    open[n] = Some(sections.len());
                    sections.push(section);
                }
                if let Some(i) = open[n] {
                    let section = &mut sections[i];
                    if section.lease_ms.is_none() && leased(after) {
                        section.lease_ms = lease_ms;
                    }
                    if now.token > 0 {
                        section.holder = Some(format!("{} #{}", name(n), now.token));
                    }
                    if next != At::Done {
                        section.exit_ns = t;
                    }
                    if at == At::Write && after.sold != before.sold {
                        section.outcome = "sold".into();
                        section.unit = Some(i64::from(was.read));
                    } else if at == At::Write {
                        section.reason = Some("stale_token".to_owned());
                    } else if at == At::Check && next == At::Release {
                        section.reason = Some("lock_lost".to_owned());
                    } else if at == At::Read && next == At::Release {
                        section.outcome = "sold_out".into();
                    }
                    if next == At::Done {
                        section.release_ns = Some(t);
                        open[n] = None;
                    }
                }
            }
        }
    }
    let to_ns = at.last().copied().unwrap_or(0) + STEP_MS * MS;
    // A dead buyer's section ended where it died, its outcome unknown; a
    // lock it left that nothing will ever free is held to the end.
    let last = worlds.last()?;
    for (n, section) in open.iter().enumerate() {
        if let Some(i) = *section
            && last.buyers[n].crashed
        {
            sections[i].outcome = "unknown".into();
            sections[i].reason = Some("crashed".to_owned());
            if super::model::stuck(last) {
                sections[i].release_ns = Some(to_ns);
            }
        }
    }
    let sold: i64 = last.sold.iter().map(|&n| i64::from(n)).sum();
    let initial = i64::from(sale.bounds.stock);
    let state = StateSnapshot {
        sku: format!("{} · {} (model)", verdict.variant, verdict.scenario),
        initial,
        remaining: i64::from(last.stock),
        sold,
        oversold: (sold - initial).max(0),
        duplicates: last.sold.iter().filter(|&&n| n > 1).count() as i64,
        ..StateSnapshot::default()
    };
    Some(Timeline {
        sku: state.sku.clone(),
        from_ns: 0,
        to_ns,
        overlaps: overlaps(&sections, MAX_PAIRS),
        overlap_count: overlap_count(&sections),
        sections,
        events,
        verdict: ledger_verdict(&sale, &state, last),
        state,
        truncated: false,
        counted_in: true,
        tick_ns: Some(tick_ns),
    })
}

/// The drawing's verdict, in the words a live run's would use: the
/// ledger's (`OVERSOLD n`, `DUPLICATES n`), or where the ledger looks
/// fine, what the counterexample broke: `STUCK`, `LOST n` (sales that
/// never reach their order) or `DUPLICATES n` (an id sold, or a sale
/// ordered or given back, more than once).
fn ledger_verdict(sale: &Sale, state: &StateSnapshot, last: &World) -> String {
    let ledger = crate::timeline::verdict(state);
    if ledger != "SAFE" {
        return ledger;
    }
    let orders = &last.pipeline.orders;
    let twice = match sale.property {
        Property::Stuck => return "STUCK".to_owned(),
        Property::OrdersKept => {
            let lost = orders.iter().filter(|o| super::pipeline::lost(last, o));
            return format!("LOST {}", lost.count());
        }
        Property::OrderedOnce => {
            beyond_one(orders.iter().map(|o| o.rows)) + beyond_one(orders.iter().map(|o| o.returns))
        }
        // Every buyer retries one id: every sale past the first.
        Property::OneSale if sale.bounds.one_request => beyond_one([last.sold.iter().sum()]),
        Property::OneSale => beyond_one(last.script_sales.iter().copied()),
        _ => return ledger,
    };
    format!("DUPLICATES {twice}")
}

/// How many past the first, over `counts` (sales, rows, returns).
fn beyond_one(counts: impl IntoIterator<Item = u8>) -> usize {
    counts
        .into_iter()
        .map(|n| usize::from(n.saturating_sub(1)))
        .sum()
}

/// The longest run of steps between two ticks, and one more: a tick's
/// length in steps, in ms.
fn tick_len(actions: &[Action]) -> u64 {
    let runs = actions.split(|a| is_tick(*a));
    let busiest = runs.map(<[Action]>::len).max().unwrap_or(0) as u64;
    (busiest + 1) * STEP_MS
}

fn is_tick(action: Action) -> bool {
    matches!(action, Action::Tick | Action::LateTick(_))
}

/// When each step is drawn (ns from the start): one [`STEP_MS`] after
/// the one before, and each tick at its boundary.
fn clock(actions: &[Action]) -> Vec<u64> {
    let tick = tick_len(actions) * MS;
    let (mut ticks, mut t) = (0, STEP_MS * MS);
    actions
        .iter()
        .map(|action| {
            if is_tick(*action) {
                ticks += 1;
                t = ticks * tick;
            } else {
                t += STEP_MS * MS;
            }
            t
        })
        .collect()
}

/// The trace of `verdict` as one self-contained HTML page, drawn as a live
/// timeline is, written to `path` (the witness of a cell with no
/// counterexample); `false` (nothing written) for a vacuous cell.
pub fn write(verdict: &Verdict, path: &std::path::Path) -> anyhow::Result<bool> {
    let Some(timeline) = timeline(verdict) else {
        return Ok(false);
    };
    let generated = crate::load::bench::utc_now();
    let page =
        crate::timeline::export::render(&timeline, &generated).map_err(anyhow::Error::msg)?;
    std::fs::write(path, page)?;
    Ok(true)
}
