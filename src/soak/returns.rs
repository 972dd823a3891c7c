//! An order variant's units given back: every reservation expires unpaid
//! after `--pay-within`, and its unit goes back to the stock, once. A
//! round judged after that reads its books with those units back, so its
//! history must hold each return, in a window the history checker can
//! place it in: after the reservation's expiry committed, before the
//! books read counted it.
//!
//! Redis says which units came back (`give_back.lua`'s `returns`: sale →
//! unit); the database says when (the expiry pass commits `expired_at`,
//! gives the unit back in Redis, then records `given_back_at`). The books
//! are read between two readings of the returns that agree, so every
//! return the read counted came before it and none came during it. A
//! return whose window took in the read, or the whole round, left the
//! history checker trying it at every place among the sales and the read:
//! undecided within 30 s.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::books::{Books, returned_units};
use super::buyers::{Got, Round};
use crate::client::StackClient;
use crate::wire::StateSnapshot;

/// How far the database's clock (which sets a reservation's deadline and
/// times its give-back) may stand from the soak's.
const CLOCK_MARGIN: Duration = Duration::from_millis(5);
/// Books read at most this many times for returns that hold still.
const READS: u32 = 20;

/// Where an order variant's units given back are read (the stack's Redis,
/// and when each came back, in its database), and how long its
/// reservations wait to be paid.
pub struct Returns<'a> {
    pub books: &'a Books,
    pub pay_within: Duration,
}

impl Returns<'_> {
    /// The round's books, read (through `client`, recorded in the round's
    /// history by hand) while no unit comes back, and the units given back
    /// before it, each recorded as come back within its window; `None`
    /// for the units if Redis never answered.
    pub(super) async fn with_books(
        &self,
        client: &StackClient,
        round: &Round,
    ) -> (anyhow::Result<StateSnapshot>, Option<Vec<i64>>) {
        let recorder = &round.recorder;
        let mut reads = 0;
        let (state, back, before) = loop {
            reads += 1;
            let Some(before) = returned_units(&self.books.store, &round.sku).await else {
                let recording = client.recording(recorder.clone());
                return (
                    super::buyers::read_state(&recording, &round.sku).await,
                    None,
                );
            };
            let before_at = recorder.now();
            let state = match super::buyers::read_state(client, &round.sku).await {
                Ok(state) => state,
                Err(err) => return (Err(err), None),
            };
            // Redis answered nothing for 2 min: the books read stands
            // alone, its returns unknown.
            let Some(after) = returned_units(&self.books.store, &round.sku).await else {
                recorder.read(&round.sku, before_at, state.remaining);
                return (Ok(state), None);
            };
            let still = set(&after) == set(&before);
            if still || reads >= READS {
                recorder.read(&round.sku, before_at, state.remaining);
                break (state, after, still.then_some(before_at));
            }
            // A unit came back while the books were read: again.
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        if back.is_empty() {
            return (Ok(state), Some(Vec::new()));
        }
        let windows = self.windows(&round.sku).await.unwrap_or_default();
        let now = recorder.now();
        let wall_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        // A database time on the recorder's clock.
        let on_recorder = |us: i64| -> u64 {
            let ago_ns = (wall_us.saturating_sub(us) as i128) * 1_000;
            (now as i128 - ago_ns).clamp(0, now as i128) as u64
        };
        let margin = CLOCK_MARGIN.as_nanos() as u64;
        let mut units = Vec::with_capacity(back.len());
        for (sale, unit) in back {
            let earliest = self.earliest(round, unit).min(now);
            let (mut call, mut ret) = match windows.get(&sale) {
                Some(&(from, to)) => (
                    on_recorder(from).saturating_sub(margin).max(earliest),
                    to.map_or(now, |to| on_recorder(to).saturating_add(margin)),
                ),
                None => (earliest, now),
            };
            // Counted by the read: back before it began.
            if let Some(before_at) = before {
                ret = ret.min(before_at);
                call = call.min(ret);
            }
            recorder.returned_between(&round.sku, call, ret, unit);
            units.push(unit);
        }
        (Ok(state), Some(units))
    }

    /// The database's windows of `sku`'s returns, asked again while it
    /// cannot answer (killed or frozen by a fault) for up to 30 s.
    async fn windows(&self, sku: &str) -> Option<HashMap<i64, (i64, Option<i64>)>> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self.books.given_back_between(sku).await {
                Ok(windows) => return Some(windows),
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(_) => return None,
            }
        }
    }

    /// The earliest moment, on the round's recorder's clock (ns), `unit`
    /// can have come back: `pay_within` (less a margin) after the first
    /// attempt that may have sold it (told it bought `unit`, or told
    /// nothing that settles it).
    fn earliest(&self, round: &Round, unit: i64) -> u64 {
        let sold_from_ms = (round.requests.iter().flat_map(|r| &r.attempts))
            .filter(|a| match a.got {
                Got::Sold(u) => u == unit,
                Got::SoldOut | Got::Busy => false,
                Got::Unsettled | Got::Wrong(_) => true,
            })
            .map(|a| a.at_ms)
            .min()
            .unwrap_or(0);
        // `at_ms` is whole ms of the soak's clock; the recorder's began
        // `clock_ns` into it.
        let sold_from = (sold_from_ms * 1_000_000).saturating_sub(round.clock_ns);
        let wait = self.pay_within.saturating_sub(CLOCK_MARGIN).as_nanos() as u64;
        (sold_from.saturating_sub(1_000_000)).saturating_add(wait)
    }
}

fn set(returns: &[(i64, i64)]) -> BTreeSet<i64> {
    returns.iter().map(|(sale, _)| *sale).collect()
}
