//! Checkpoints: each finished round is judged while the load goes on, once
//! every fault that struck before its end has healed and the grace after
//! it has passed, by the soak's judge and by the history checker beside
//! it; what it found is kept (and its history written to `--history`),
//! its history let go (a half-hour soak sends about a million requests).
//! Order SKUs are reconciled once their messages have become orders; a
//! violation of their books carries their round's evidence.

use std::collections::BTreeMap;
use std::sync::Mutex as StdMutex;
use std::time::Duration;

use super::books::{Books, OrderSku, Settled, forget};
use super::buyers::{Got, Round};
use super::evidence::{Evidence, on_load_clock};
use super::faults::GRACE_S;
use super::judge;
use super::second::{self, HistoryFile};
use crate::client::StackClient;
use crate::variants::Variant;
use crate::wire::{SoakFault, SoakOrders, SoakVariant, SoakViolation, Unknowns};

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
    /// The longest a round waited, once it ended, to be judged (ms).
    pub(super) judged_late_ms: u64,
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
    pub(super) history: HistoryFile,
    /// How long a reservation waits to be paid (the stack's
    /// `--pay-within`; zero when unknown: a target's own).
    pub(super) pay_within: Duration,
    /// When the soak began (the rounds' clock).
    pub(super) started: std::time::Instant,
}

/// Rounds judged at once.
const JUDGES: usize = 8;

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
        // A few at once: each asks the stack again and waits for its
        // answers, and one at a time fell 16 minutes behind a 30-minute
        // soak on a busy machine.
        futures_util::StreamExt::for_each_concurrent(
            futures_util::stream::iter(ready),
            JUDGES,
            |round| self.judge(round, faults),
        )
        .await;
        let settled = self.books.settle(faults, now_s.is_none()).await;
        let mut found = self.found.lock().await;
        for settled in settled {
            let order = &settled.orders;
            if order.verdict == "MATCH" {
                found.orders_matched += 1;
                continue;
            }
            if !order.allowed {
                let v = books_violation(&settled, faults, &self.rerun);
                eprintln!("VIOLATION {} {}: {}", v.variant, v.sku, v.what);
                if let Ok(variant) = order.variant.parse::<Variant>() {
                    found.variants.entry(variant).or_default().violations += 1;
                }
                found.violations.push(v);
            } else if let Ok(variant) = order.variant.parse::<Variant>() {
                found
                    .variants
                    .entry(variant)
                    .or_default()
                    .lost_units_allowed += 1;
            }
            found.orders.push(settled.orders);
        }
    }

    async fn judge(&self, round: Round, faults: &[SoakFault]) {
        let returns = super::returns::Returns {
            books: &self.books,
            pay_within: self.pay_within,
        };
        let (mut broken, counted) = judge::round(
            &self.client,
            &round,
            faults,
            self.persist,
            self.stock,
            Some(&returns),
        )
        .await;
        // The second judge, from what the buyers were told (the ids asked
        // again and the books read after are in the history too).
        let attempts = round.requests.iter().map(|r| r.attempts.len()).sum();
        let checked = second::judge(&round.recorder, attempts, &counted).await;
        let recorded = on_load_clock(&round.recorder.text(), round.clock_ns);
        self.history.append(&recorded);
        if let Some(disagreement) = &checked.disagreement {
            broken.push(disagreement.clone());
        }
        let (verdict, ms) = (checked.verdict.clone(), checked.elapsed_ms);
        // Kept for a violation now, or of its books later.
        let evidence = if !broken.is_empty() || round.variant.orders() {
            Evidence::of(&round, Some(checked))
        } else {
            Evidence::default()
        };
        let late_ms = (self.started.elapsed().as_millis() as u64).saturating_sub(round.to_ms);
        let mut found = self.found.lock().await;
        found.judged_late_ms = found.judged_late_ms.max(late_ms);
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
        *entry.history.entry(verdict).or_insert(0) += 1;
        entry.history_ms += ms;
        entry.history_ms_max = entry.history_ms_max.max(ms);
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
                    evidence: evidence.clone(),
                });
        } else if broken.is_empty() {
            forget(&self.books.store, &round.sku, round.variant, false).await;
        }
        if !broken.is_empty() {
            found.kept += 1;
        }
        for what in broken {
            let violation = evidence.violation(what, faults, &self.rerun);
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
        history_check: None,
        recorded: Vec::new(),
        timeline: None,
        rerun: rerun.to_owned(),
    }
}

/// A violation of an order SKU's books: the verdict, with the evidence
/// its round kept (its window, attempts, recorded history and the history
/// checker's verdict) and every fault of `faults` around the window.
fn books_violation(settled: &Settled, faults: &[SoakFault], rerun: &str) -> SoakViolation {
    let what = format!(
        "its orders do not match its ledger: {}",
        settled.orders.verdict
    );
    settled.evidence.violation(what, faults, rerun)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Recorder, Told};
    use crate::soak::buyers::{Attempt, Ending, Request};
    use crate::wire::SoakOrders;

    fn fault(kind: &str, target: &str, at_s: f64, healed_s: f64, error: &str) -> SoakFault {
        SoakFault {
            kind: kind.to_owned(),
            target: target.to_owned(),
            at_s,
            healed_s,
            error: error.to_owned(),
        }
    }

    /// Finding 5: a `lua-then-queue` SKU whose orders lost a unit was
    /// reported as `from_s 0.0, to_s 0.0`, no fault, no history: nothing
    /// to reproduce it with. Its report is its round's: the window, the
    /// attempts, the recorded history, and every fault that struck any
    /// part of the stack meanwhile, whatever it was aimed at.
    #[test]
    fn a_violation_of_the_books_carries_its_rounds_window_history_and_every_fault() {
        let sku = "soak7-12-1";
        let recorder = Recorder::prefixed("lua-then-queue/");
        recorder.declare(sku, 40);
        recorder.told(recorder.call(sku), 1, Some("soak7-12-1-0"), Told::Sold(40));
        recorder.read(sku, recorder.now(), 39);
        let round = Round {
            variant: Variant::LuaThenQueue,
            sku: sku.to_owned(),
            from_ms: 12_000,
            to_ms: 19_500,
            ending: Ending::SoldOut,
            requests: vec![Request {
                id: "soak7-12-1-0".to_owned(),
                attempts: vec![Attempt {
                    at_ms: 13_150,
                    took_ms: 4,
                    status: 200,
                    got: Got::Sold(40),
                    reason: None,
                    instance: Some("a".to_owned()),
                    replayed: false,
                }],
            }],
            recorder,
            clock_ns: 11_900_000_000,
        };
        let checked = crate::wire::HistoryJudgement {
            verdict: "linearizable".to_owned(),
            why: String::new(),
            ops: 2,
            elapsed_ms: 1,
            disagreement: None,
        };
        let settled = Settled {
            orders: SoakOrders {
                variant: "lua-then-queue".to_owned(),
                sku: sku.to_owned(),
                verdict: "LOST 1 (sold, no order)".to_owned(),
                allowed: false,
            },
            evidence: Evidence::of(&round, Some(checked.clone())),
        };
        let faults = [
            fault("crash", "an instance crashed", 3.0, 6.0, ""),
            fault("restart-redis", "redis", 13.2, 15.1, ""),
            // Aimed at another variant's SKU, and at an instance: the
            // stack is shared.
            fault("lock-vanishes", "soak7-3-2", 16.0, 16.0, ""),
            fault("kill-instance", "instance b", 18.0, 20.0, ""),
            // Struck, then failed to heal cleanly: listed, with why.
            fault("crash-before-enqueue", "", 19.0, 23.0, "redis, to disarm"),
            fault("pause-redis", "redis", 60.0, 62.0, ""),
        ];
        let v = books_violation(&settled, &faults, "stocklock soak --seed 7");
        assert_eq!((v.from_s, v.to_s), (12.0, 19.5), "{v:?}");
        assert!(v.what.contains("LOST 1"), "{v:?}");
        let kinds: Vec<&str> = v
            .faults
            .iter()
            .map(|f| f.split(' ').nth(2).unwrap_or(""))
            .collect();
        assert_eq!(
            kinds,
            [
                "crash",
                "restart-redis",
                "lock-vanishes",
                "kill-instance",
                "crash-before-enqueue"
            ],
            "{:?}",
            v.faults
        );
        assert!(v.faults[4].contains("failed: redis, to disarm"), "{v:?}");
        assert_eq!(v.history.len(), 1, "{v:?}");
        assert!(v.history[0].contains("soak7-12-1-0  attempt 1  200 Sold(40) @a"));
        assert_eq!(v.history_check, Some(checked));
        // The recorded history, as `stocklock history check` reads it.
        let text = v.recorded.join("\n");
        let parsed = crate::history::op::parse(&text).unwrap();
        assert_eq!(parsed[0].sku, "lua-then-queue/soak7-12-1");
        assert_eq!(parsed[0].ops.len(), 2);
        // On the load's clock, the faults' (the round began at 11.9 s).
        assert!(parsed[0].ops[0].call >= 11_900_000_000, "{text}");
        assert!(parsed[0].ops[0].call < 13_000_000_000, "{text}");
        assert_eq!(v.rerun, "stocklock soak --seed 7");
    }
}
