//! Checkpoints: each finished round is judged while the load goes on, once
//! every fault that struck before its end has healed and the grace after
//! it has passed; what it found is kept, its history let go (a half-hour
//! soak sends about a million requests). Order SKUs are reconciled once
//! their messages have become orders.

use std::collections::BTreeMap;
use std::sync::Mutex as StdMutex;

use super::books::{Books, forget};
use super::buyers::{Got, Round};
use super::judge::{self, GRACE_S};
use crate::client::StackClient;
use crate::variants::Variant;
use crate::wire::{SoakFault, SoakOrders, SoakVariant, SoakViolation, Unknowns};

/// An order variant's round, reconciled at the end.
pub(super) struct OrderSku {
    pub(super) variant: Variant,
    pub(super) sku: String,
    pub(super) from_ms: u64,
}

/// What the rounds judged so far found.
#[derive(Default)]
pub(super) struct Found {
    pub(super) variants: BTreeMap<Variant, SoakVariant>,
    pub(super) violations: Vec<SoakViolation>,
    /// SKUs left deadlocked where a claim allows it (their lock stays).
    pub(super) deadlocked: Vec<String>,
    /// When each variant sold, ms from the start, for the recovery times.
    pub(super) sales: BTreeMap<Variant, Vec<u64>>,
    pub(super) unknowns: Unknowns,
    /// Order SKUs whose books matched, and those that did not.
    pub(super) orders_matched: u64,
    pub(super) orders: Vec<SoakOrders>,
    /// SKUs judged; their keys let go unless they broke a claim.
    pub(super) skus: u64,
    /// SKUs kept in Redis as evidence.
    pub(super) kept: u64,
}

/// Rounds waiting for their checkpoint, and what the judged ones found.
pub(super) struct Checker {
    pub(super) pending: StdMutex<Vec<Round>>,
    pub(super) found: tokio::sync::Mutex<Found>,
    pub(super) client: StackClient,
    pub(super) persist: bool,
    pub(super) stock: i64,
    pub(super) rerun: String,
    pub(super) books: Books,
}

impl Checker {
    /// Judges every pending round whose faults are all known: ended more
    /// than the grace ago (all of them when `now_s` is `None`: the end),
    /// with no fault that started before its end still playing
    /// (`active_since_s`: the earliest start of one).
    pub(super) async fn checkpoint(
        &self,
        faults: &[SoakFault],
        now_s: Option<f64>,
        active_since_s: Option<f64>,
    ) {
        let ready: Vec<Round> = {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            let (ready, wait) = std::mem::take(&mut *pending).into_iter().partition(|r| {
                let to_s = r.to_ms as f64 / 1e3;
                now_s.is_none_or(|now| to_s + GRACE_S < now)
                    && active_since_s.is_none_or(|since| since > to_s)
            });
            *pending = wait;
            ready
        };
        for round in ready {
            self.judge(round, faults).await;
        }
        let settled = self.books.settle(faults, now_s.is_none()).await;
        let mut found = self.found.lock().await;
        for order in settled {
            if order.verdict == "MATCH" {
                found.orders_matched += 1;
                continue;
            }
            if !order.allowed {
                let what = format!("its orders do not match its ledger: {}", order.verdict);
                eprintln!("VIOLATION {} {}: {what}", order.variant, order.sku);
                if let Ok(variant) = order.variant.parse::<Variant>() {
                    found.variants.entry(variant).or_default().violations += 1;
                }
                let v = bare(&order.variant, &order.sku, what, (0.0, 0.0), &self.rerun);
                found.violations.push(v);
            } else if let Ok(variant) = order.variant.parse::<Variant>() {
                found
                    .variants
                    .entry(variant)
                    .or_default()
                    .lost_units_allowed += 1;
            }
            found.orders.push(order);
        }
    }

    async fn judge(&self, round: Round, faults: &[SoakFault]) {
        let (broken, counted) =
            judge::round(&self.client, &round, faults, self.persist, self.stock).await;
        let mut found = self.found.lock().await;
        found.skus += 1;
        let entry = found.variants.entry(round.variant).or_default();
        entry.rounds += 1;
        entry.requests += round
            .requests
            .iter()
            .map(|r| r.attempts.len() as u64)
            .sum::<u64>();
        entry.sold += counted.answered_sold as u64;
        entry.oversold_allowed += counted.oversold;
        entry.deadlocks_allowed += u64::from(counted.deadlocked);
        entry.violations += broken.len() as u64;
        if counted.deadlocked {
            found.deadlocked.push(round.sku.clone());
        }
        let sales = found.sales.entry(round.variant).or_default();
        for attempt in round.requests.iter().flat_map(|r| &r.attempts) {
            if matches!(attempt.got, Got::Sold(_)) {
                sales.push(attempt.at_ms + attempt.took_ms);
            }
        }
        for request in round.requests.iter().filter(|r| r.was_unknown()) {
            let u = &mut found.unknowns;
            u.total += 1;
            match request.settled() {
                Got::Sold(_) => u.sold += 1,
                Got::SoldOut | Got::Busy => u.not_sold += 1,
                Got::Unsettled | Got::Wrong(_) => u.unresolved += 1,
            }
        }
        if round.variant.orders() {
            self.books
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(OrderSku {
                    variant: round.variant,
                    sku: round.sku.clone(),
                    from_ms: round.from_ms,
                });
        } else if broken.is_empty() {
            forget(&self.books.store, &round.sku, round.variant, false).await;
        }
        if !broken.is_empty() {
            found.kept += 1;
        }
        for what in broken {
            let violation = judge::violation(&round, what, faults, &self.rerun);
            eprintln!(
                "VIOLATION {} {}: {}",
                violation.variant, violation.sku, violation.what
            );
            found.violations.push(violation);
        }
    }

    /// A violation that belongs to no round (the end's checks).
    pub(super) async fn add(
        &self,
        variant: &str,
        sku: &str,
        what: String,
        (from_s, to_s): (f64, f64),
    ) {
        let mut found = self.found.lock().await;
        if let Some(v) = Variant::ALL.iter().find(|v| v.name() == variant) {
            found.variants.entry(*v).or_default().violations += 1;
        }
        found
            .violations
            .push(bare(variant, sku, what, (from_s, to_s), &self.rerun));
    }
}

/// A violation of no one round's history (the books, recovery, Redis at
/// the end): what broke, where and when, and the rerun.
pub(super) fn bare(
    variant: &str,
    sku: &str,
    what: String,
    (from_s, to_s): (f64, f64),
    rerun: &str,
) -> SoakViolation {
    SoakViolation {
        variant: variant.to_owned(),
        sku: sku.to_owned(),
        what,
        from_s,
        to_s,
        faults: Vec::new(),
        history: Vec::new(),
        timeline: None,
        rerun: rerun.to_owned(),
    }
}
