//! The history checker: each round of a SKU judged from the ledger and
//! from every answer its buyers got, against the claims its variant made
//! for the faults that struck while it sold.

use std::collections::{BTreeMap, BTreeSet};

use super::buyers::{Got, Round, path};
use super::faults::Kind;
use crate::client::StackClient;
use crate::variants::{Behaviour, Scenario, Variant};
use crate::wire::{SoakFault, SoakViolation};

/// How long after a fault healed its effects may still show (a stale
/// lock's lease, a late write, an instance's restart).
pub const GRACE_S: f64 = 10.0;
/// Sold ids of each round asked again besides those an unknown answer
/// made doubtful.
const ASKED_AGAIN: i64 = 3;

/// What a round showed that the claims allow: counted, not hidden.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counted {
    pub oversold: i64,
    pub deadlocked: bool,
    /// The ledger's sales, and how many of them a buyer was told of.
    pub sold: i64,
    pub answered_sold: i64,
}

/// The faults that struck `sku` between `from_s` and `to_s`.
pub fn struck<'a>(
    faults: &'a [SoakFault],
    sku: &str,
    from_s: f64,
    to_s: f64,
) -> Vec<&'a SoakFault> {
    faults
        .iter()
        .filter(|f| f.error.is_empty())
        .filter(|f| f.at_s <= to_s && f.healed_s + GRACE_S >= from_s)
        .filter(|f| Kind::parse(&f.kind).is_some_and(Kind::strikes_all) || f.target == sku)
        .collect()
}

/// The behaviours `variant` claims under `faults` (and under the race and
/// the retries every round has): the union of its claims in every
/// scenario those faults can realise.
pub fn allowed(variant: Variant, faults: &[&SoakFault], persist: bool) -> BTreeSet<Behaviour> {
    let mut scenarios = vec![Scenario::Race, Scenario::RetryStorm];
    for fault in faults {
        if let Some(kind) = Kind::parse(&fault.kind) {
            scenarios.extend_from_slice(kind.scenarios());
            if kind == Kind::RestartRedis && !persist {
                scenarios.push(Scenario::RedisDataLoss);
            }
        }
    }
    scenarios
        .iter()
        .map(|s| s.claim(variant).behaviour)
        .collect()
}

/// Judges one round: the violations it shows, and what it counted.
pub async fn round(
    client: &StackClient,
    round: &Round,
    faults: &[SoakFault],
    persist: bool,
    stock: i64,
) -> (Vec<String>, Counted) {
    let (from_s, to_s) = (round.from_ms as f64 / 1e3, round.to_ms as f64 / 1e3);
    let struck = struck(faults, &round.sku, from_s, to_s);
    let allowed = allowed(round.variant, &struck, persist);
    let may_oversell = allowed.contains(&Behaviour::Oversells);
    let data_lost = !persist && struck.iter().any(|f| f.kind == Kind::RestartRedis.name());
    let mut broken = Vec::new();
    let mut counted = Counted::default();

    // Every request settled, each id sold once, every sale told recorded.
    let mut units: BTreeMap<i64, &str> = BTreeMap::new();
    for request in &round.requests {
        let sales: BTreeSet<i64> = request
            .attempts
            .iter()
            .filter_map(|a| match a.got {
                Got::Sold(unit) => Some(unit),
                _ => None,
            })
            .collect();
        if sales.len() > 1 && !may_oversell {
            broken.push(format!(
                "id {} was answered sold as units {sales:?}",
                request.id
            ));
        }
        match request.settled() {
            Got::Unsettled => broken.push(format!(
                "id {} never settled: {} attempts, the last {}",
                request.id,
                request.attempts.len(),
                request.attempts.last().map_or(0, |a| a.status)
            )),
            Got::Wrong(status) => broken.push(format!(
                "id {} was answered {status} ({})",
                request.id,
                request
                    .attempts
                    .last()
                    .and_then(|a| a.reason.as_deref())
                    .unwrap_or("")
            )),
            Got::Sold(unit) => {
                counted.answered_sold += 1;
                if let Some(other) = units.insert(unit, &request.id)
                    && !may_oversell
                {
                    broken.push(format!(
                        "unit {unit} was sold to {other} and to {}",
                        request.id
                    ));
                }
                // Asked again, the id must answer the same sale from its
                // record: every id an unknown answer made doubtful, and a
                // few others of each round (the ledger's count above
                // covers them all).
                if !request.was_unknown() && counted.answered_sold > ASKED_AGAIN {
                    continue;
                }
                let again = ask_again(client, &path(round.variant, &round.sku, &request.id)).await;
                let same = again.sold() && again.unit() == Some(unit) && again.replayed();
                if !same && !data_lost {
                    broken.push(format!(
                        "id {} was told it bought unit {unit}; asked again it got {} {:?} (replayed: {})",
                        request.id,
                        again.status,
                        again.unit(),
                        again.replayed()
                    ));
                }
            }
            Got::SoldOut | Got::Busy => {}
        }
    }
    // Read after the ids were asked again: the read counts in every
    // instance's answers, those too, before the SKU is let go.
    let state = match read_state(client, &round.sku).await {
        Ok(state) if state.initial == stock => state,
        _ if data_lost => return (broken, counted),
        Ok(state) => {
            broken.push(format!(
                "the ledger's initial stock is {}, not {stock}",
                state.initial
            ));
            return (broken, counted);
        }
        Err(err) => {
            broken.push(format!("its ledger could not be read: {err:#}"));
            return (broken, counted);
        }
    };
    counted.sold = state.sold;
    if state.oversold < 0 {
        broken.push(format!(
            "LEDGER_BROKEN {}: stock left without a recorded sale",
            state.oversold
        ));
    } else if state.oversold > 0 || state.duplicates > 0 {
        if may_oversell {
            counted.oversold = state.oversold.max(state.duplicates);
        } else {
            broken.push(format!(
                "oversold {}, {} units sold twice, where every claim under its faults is safe",
                state.oversold, state.duplicates
            ));
        }
    }

    if counted.answered_sold > counted.sold && !data_lost {
        broken.push(format!(
            "{} sales were answered but the ledger counts {}",
            counted.answered_sold, counted.sold
        ));
    } else if counted.sold > counted.answered_sold && !may_oversell {
        broken.push(format!(
            "the ledger counts {} sales but only {} buyers were told they bought",
            counted.sold, counted.answered_sold
        ));
    }
    // A round whose last buyers were still settling when it sold out is
    // no stall.
    if round.ending == super::buyers::Ending::Stalled && state.remaining > 0 {
        if allowed.contains(&Behaviour::Deadlock) {
            counted.deadlocked = true;
        } else {
            broken.push(format!(
                "stopped selling for {} s with {} left",
                super::STALL.as_secs(),
                state.remaining
            ));
        }
    }
    (broken, counted)
}

/// The SKU's ledger, read again while the stack cannot answer (a fault
/// struck meanwhile: Redis restarting, loading its data) for up to 2 min.
async fn read_state(client: &StackClient, sku: &str) -> anyhow::Result<crate::wire::StateSnapshot> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        match client.state(sku).await {
            Err(_) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
            read => return read,
        }
    }
}

/// `path` asked again until an answer settles it (2 min at most).
async fn ask_again(client: &StackClient, path: &str) -> crate::client::Deduction {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let answer = client.deduct(path).await;
        if super::buyers::got(&answer) != Got::Unsettled || std::time::Instant::now() > deadline {
            return answer;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

/// A violation with what reproduces it: the faults around it and the
/// SKU's history.
pub fn violation(round: &Round, what: String, faults: &[SoakFault], rerun: &str) -> SoakViolation {
    let (from_s, to_s) = (round.from_ms as f64 / 1e3, round.to_ms as f64 / 1e3);
    let around = faults
        .iter()
        .filter(|f| f.at_s <= to_s + 5.0 && f.healed_s + GRACE_S >= from_s - 5.0)
        .map(|f| {
            format!(
                "{:.1} s {} {} (healed {:.1} s){}",
                f.at_s,
                f.kind,
                f.target,
                f.healed_s,
                if f.error.is_empty() {
                    String::new()
                } else {
                    format!(" failed: {}", f.error)
                }
            )
        })
        .collect();
    let mut lines: Vec<(u64, String)> = round
        .requests
        .iter()
        .flat_map(|r| {
            r.attempts.iter().enumerate().map(move |(n, a)| {
                (
                    a.at_ms,
                    format!(
                        "{:>9.3} s  {}  attempt {}  {} {:?}{}{}{}  {} ms",
                        a.at_ms as f64 / 1e3,
                        r.id,
                        n + 1,
                        a.status,
                        a.got,
                        a.reason
                            .as_deref()
                            .map(|r| format!(" {r}"))
                            .unwrap_or_default(),
                        a.instance
                            .as_deref()
                            .map(|i| format!(" @{i}"))
                            .unwrap_or_default(),
                        if a.replayed { " replayed" } else { "" },
                        a.took_ms
                    ),
                )
            })
        })
        .collect();
    lines.sort();
    let history = lines
        .into_iter()
        .rev()
        .take(60)
        .rev()
        .map(|(_, l)| l)
        .collect();
    SoakViolation {
        variant: round.variant.name().to_owned(),
        sku: round.sku.clone(),
        what,
        from_s,
        to_s,
        faults: around,
        history,
        timeline: None,
        rerun: rerun.to_owned(),
    }
}
