//! The soak's own judge: each round of a SKU judged from the ledger and
//! from every answer its buyers got, against the claims its variant made
//! for the faults that struck while it sold. (The independent history
//! checker judges the same round beside it: [`super::second`].)

use std::collections::{BTreeMap, BTreeSet};

use super::buyers::{Got, Round, path};
use super::faults::{Kind, allowed, struck};
use crate::client::StackClient;
use crate::variants::Behaviour;
use crate::wire::SoakFault;

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
    /// The first thing the round showed that is unsafe (an oversell, a
    /// unit or an id sold twice, a sale told that the ledger never
    /// recorded), allowed by a claim or not: the soak's judge's word on
    /// safety, set beside the history checker's.
    pub unsafe_seen: Option<String>,
    /// Redis lost the round's ledger (restarted empty, without `--persist`).
    pub data_lost: bool,
    /// A claim of the faults that struck the round allows losing units.
    pub may_lose_units: bool,
}

impl Counted {
    fn saw(&mut self, what: &str) {
        self.unsafe_seen.get_or_insert_with(|| what.to_owned());
    }
}

/// Judges one round: the violations it shows, and what it counted. Its
/// ids are asked again, and its books read, through a client that records
/// into the round's history (`round.recorder`).
pub async fn round(
    client: &StackClient,
    round: &Round,
    faults: &[SoakFault],
    persist: bool,
    stock: i64,
    returns: Option<&super::returns::Returns<'_>>,
) -> (Vec<String>, Counted) {
    let (from_s, to_s) = (round.from_ms as f64 / 1e3, round.to_ms as f64 / 1e3);
    let struck = struck(faults, &round.sku, from_s, to_s);
    let allowed = allowed(round.variant, &struck, persist);
    let may_oversell = allowed.contains(&Behaviour::Oversells);
    let data_lost = !persist && struck.iter().any(|f| f.kind == Kind::RestartRedis.name());
    let mut broken = Vec::new();
    let mut counted = Counted {
        data_lost,
        may_lose_units: allowed.contains(&Behaviour::LosesUnits),
        ..Counted::default()
    };
    let plain = client;
    let client = &client.recording(round.recorder.clone());

    // Every request settled, each id sold once, every sale told recorded.
    let mut units: BTreeMap<i64, Vec<&str>> = BTreeMap::new();
    for request in &round.requests {
        let sales: BTreeSet<i64> = request
            .attempts
            .iter()
            .filter_map(|a| match a.got {
                Got::Sold(unit) => Some(unit),
                _ => None,
            })
            .collect();
        if sales.len() > 1 {
            let what = format!("id {} was answered sold as units {sales:?}", request.id);
            counted.saw(&what);
            if !may_oversell {
                broken.push(what);
            }
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
                units.entry(unit).or_default().push(&request.id);
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
    // Then the units given back (expired reservations), each of which may
    // be sold once more: read about the books so that the history holds
    // every return the books counted, and none they did not.
    let (read, back) = match returns {
        Some(returns) if round.variant.orders() => {
            let (read, back) = returns.with_books(plain, round).await;
            let back = back.unwrap_or_else(|| {
                broken.push("its units given back could not be read".to_owned());
                Vec::new()
            });
            (read, back)
        }
        _ => (
            super::buyers::read_state(client, &round.sku).await,
            Vec::new(),
        ),
    };
    for (unit, ids) in &units {
        let again = back.iter().filter(|u| *u == unit).count();
        if ids.len() > 1 + again {
            let what = format!(
                "unit {unit} was sold to {} and to {} (given back {again} times)",
                ids[0], ids[1]
            );
            counted.saw(&what);
            if !may_oversell {
                broken.push(what);
            }
        }
    }
    let state = match read {
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
        let what = format!(
            "LEDGER_BROKEN {}: stock left without a recorded sale",
            state.oversold
        );
        counted.saw(&what);
        broken.push(what);
    } else if state.oversold > 0 || state.duplicates > 0 {
        counted.saw(&format!(
            "oversold {}, {} units sold twice (the ledger)",
            state.oversold, state.duplicates
        ));
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
        let what = format!(
            "{} sales were answered but the ledger counts {}",
            counted.answered_sold, counted.sold
        );
        counted.saw(&what);
        broken.push(what);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::variants::Variant;

    fn fault(kind: Kind) -> SoakFault {
        SoakFault {
            kind: kind.name().to_owned(),
            target: String::new(),
            at_s: 1.0,
            healed_s: 2.0,
            error: String::new(),
        }
    }

    /// Finding 5: `lua-then-queue` loses a unit whenever a sale's script
    /// runs and its XADD never follows: a Redis asleep or restarted, or an
    /// instance frozen, past the store's 1 s response timeout, as surely as
    /// a crash (the soak shows each of them, one kind at a time). Under
    /// those faults its claims allow it; a plain race still does not, nor
    /// does any of them let a variant without orders lose anything.
    #[test]
    fn a_lost_answer_is_crash_before_enqueues_gap_for_lua_then_queue() {
        for kind in [
            Kind::PauseRedis,
            Kind::RestartRedis,
            Kind::StopInstance,
            Kind::PauseHolder,
            Kind::Partition,
            Kind::KillInstance,
        ] {
            let struck = fault(kind);
            let may = allowed(Variant::LuaThenQueue, &[&struck], true);
            assert!(may.contains(&Behaviour::LosesUnits), "{}", kind.name());
            let lua = allowed(Variant::Lua, &[&struck], true);
            assert!(!lua.contains(&Behaviour::LosesUnits), "{}", kind.name());
            let stream = allowed(Variant::LuaStream, &[&struck], true);
            assert!(!stream.contains(&Behaviour::LosesUnits), "{}", kind.name());
        }
        let race = allowed(Variant::LuaThenQueue, &[], true);
        assert!(!race.contains(&Behaviour::LosesUnits));
        let skewed = fault(Kind::ClockSkew);
        let skew = allowed(Variant::LuaThenQueue, &[&skewed], true);
        assert!(!skew.contains(&Behaviour::LosesUnits));
    }
}
