//! The load: every variant sells at once, each a fresh SKU per round, with
//! a few buyers who behave as a real client does: every request carries an
//! id, and an answer that settles nothing (`unknown`, no answer at all, a
//! gateway error, "in progress") is asked again with the same id until one
//! does. Every attempt is recorded twice: in the round's attempts (the
//! soak's judge reads them), and by the round's recording client, in the
//! history checker's format (what each attempt was told, on one clock).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::client::{DeductBody, Deduction, StackClient};
use crate::history::Recorder;
use crate::variants::Variant;
use crate::wire::OutcomeKind;

/// The lease every lock variant is asked for: short, so that a lock whose
/// holder died frees within seconds.
pub const LEASE_MS: u64 = 3_000;
/// The business work of every sale.
pub const WORK_MS: u64 = 2;
/// How long a request is retried with its id before it counts as unresolved.
pub const SETTLE_WITHIN: Duration = Duration::from_secs(180);

/// What one attempt got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Got {
    Sold(i64),
    SoldOut,
    /// Refused, nothing sold: the lock was held, a stale token...
    Busy,
    /// Settles nothing: `unknown`, another attempt of the id in progress,
    /// no answer, a gateway's error, a store that could not be reached.
    Unsettled,
    /// An answer no client should get (bad input, a SKU not found).
    Wrong(u16),
}

/// One attempt, in milliseconds from the start of the load.
#[derive(Clone, Debug)]
pub struct Attempt {
    pub at_ms: u64,
    pub took_ms: u64,
    pub status: u16,
    pub got: Got,
    /// The reason a refusal or an error gave.
    pub reason: Option<String>,
    pub instance: Option<String>,
    pub replayed: bool,
}

/// One buyer's request and every attempt it took.
#[derive(Clone, Debug)]
pub struct Request {
    pub id: String,
    pub attempts: Vec<Attempt>,
}

impl Request {
    /// Its last attempt's answer: what it settled as.
    pub fn settled(&self) -> Got {
        self.attempts.last().map_or(Got::Unsettled, |a| a.got)
    }

    /// Whether an attempt before the last settled nothing.
    pub fn was_unknown(&self) -> bool {
        self.attempts.iter().any(|a| a.got == Got::Unsettled)
    }
}

/// What the buyers share.
pub struct Shared {
    pub client: StackClient,
    pub started: Instant,
    /// Set when the load is to stop.
    pub stop: AtomicBool,
    pub requests: AtomicU64,
    pub sold: AtomicU64,
    pub unknowns: AtomicU64,
    pub unknowns_resolved: AtomicU64,
    /// When each variant last sold, ms from the start.
    pub last_sale: Mutex<std::collections::BTreeMap<Variant, u64>>,
    /// Faults playing now, and when the last one healed (ms from the
    /// start): a round stalls only in a quiet stretch, when no fault has
    /// played for as long as it waits for a sale.
    pub faults_playing: AtomicU64,
    pub healed_ms: AtomicU64,
}

impl Shared {
    pub fn ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// How long since a fault last played (zero while one does).
    pub fn quiet_for(&self) -> Duration {
        if self.faults_playing.load(Ordering::Relaxed) > 0 {
            return Duration::ZERO;
        }
        Duration::from_millis(
            self.ms()
                .saturating_sub(self.healed_ms.load(Ordering::Relaxed)),
        )
    }

    /// Whether every one of `variants` sold at or after `since_ms`.
    pub fn all_sold_since(&self, variants: &[Variant], since_ms: u64) -> bool {
        let last = self.last_sale.lock().unwrap_or_else(|p| p.into_inner());
        variants
            .iter()
            .all(|v| last.get(v).is_some_and(|&at| at >= since_ms))
    }
}

/// How a round of one SKU ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    SoldOut,
    /// No sale for [`super::STALL`] with stock left.
    Stalled,
    /// The load stopped.
    Stopped,
}

/// One SKU sold through by one variant.
#[derive(Debug)]
pub struct Round {
    pub variant: Variant,
    pub sku: String,
    pub from_ms: u64,
    pub to_ms: u64,
    pub ending: Ending,
    pub requests: Vec<Request>,
    /// The round's history, as its recording client wrote it: the reset
    /// that declared the SKU, every attempt and what it was told.
    pub recorder: Recorder,
    /// When the recorder's clock began, ns from the start of the load (its
    /// times plus this are on the load's clock, the faults').
    pub clock_ns: u64,
}

/// The path of one attempt.
pub fn path(variant: Variant, sku: &str, id: &str) -> String {
    let lease = if variant.takes_lock() {
        format!("&lease_ms={LEASE_MS}")
    } else {
        String::new()
    };
    format!(
        "/deductStock/{}?sku={sku}&request_id={id}&work_ms={WORK_MS}{lease}",
        variant.name()
    )
}

/// What one answer settles.
pub fn got(answer: &Deduction) -> Got {
    match (&answer.body, answer.status) {
        (DeductBody::Outcome(body), _) => match body.outcome {
            OutcomeKind::Sold => Got::Sold(body.unit.unwrap_or(-1)),
            OutcomeKind::SoldOut => Got::SoldOut,
            OutcomeKind::Busy if body.reason.as_deref() == Some("in_progress") => Got::Unsettled,
            OutcomeKind::Busy => Got::Busy,
            _ => Got::Unsettled,
        },
        (_, 0 | 500..=599) => Got::Unsettled,
        (_, status) => Got::Wrong(status),
    }
}

/// One request, sent through `client` (the round's, recording): attempts
/// with the same id until an answer settles it, or [`SETTLE_WITHIN`] has
/// passed.
pub async fn buy(
    shared: &Shared,
    client: &StackClient,
    variant: Variant,
    sku: &str,
    id: String,
) -> Request {
    let path = path(variant, sku, &id);
    let first = Instant::now();
    let mut attempts = Vec::new();
    let mut backoff = Duration::from_millis(50);
    loop {
        let at_ms = shared.ms();
        let answer = client.deduct(&path).await;
        shared.requests.fetch_add(1, Ordering::Relaxed);
        let got = got(&answer);
        let (instance, replayed) = match &answer.body {
            DeductBody::Outcome(body) => (Some(body.instance.clone()), body.replayed),
            _ => (None, false),
        };
        attempts.push(Attempt {
            at_ms,
            took_ms: answer.took.as_millis() as u64,
            status: answer.status,
            got,
            reason: answer.reason().map(str::to_owned),
            instance,
            replayed,
        });
        if got != Got::Unsettled {
            break;
        }
        if attempts.len() == 1 {
            shared.unknowns.fetch_add(1, Ordering::Relaxed);
        }
        if first.elapsed() > SETTLE_WITHIN {
            return Request { id, attempts };
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
    if attempts.len() > 1 {
        shared.unknowns_resolved.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(last) = attempts.last().filter(|a| matches!(a.got, Got::Sold(_))) {
        shared.sold.fetch_add(1, Ordering::Relaxed);
        let at = last.at_ms;
        let mut sales = shared.last_sale.lock().unwrap_or_else(|p| p.into_inner());
        let entry = sales.entry(variant).or_insert(at);
        *entry = (*entry).max(at);
    }
    Request { id, attempts }
}

/// Sells `sku` (already stocked, through `client`, which records the
/// round's history) with `buyers` buyers until it is sold out, sells
/// nothing for `stall` while no fault plays, or the load stops.
pub async fn round(
    shared: Arc<Shared>,
    client: StackClient,
    variant: Variant,
    sku: String,
    buyers: usize,
    stall: Duration,
) -> Round {
    let from_ms = shared.ms();
    let done = Arc::new(AtomicBool::new(false));
    let ending = Arc::new(Mutex::new(Ending::Stopped));
    let last_sale = Arc::new(Mutex::new(Instant::now()));
    let next = Arc::new(AtomicU64::new(0));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..buyers {
        let (shared, client, done, ending, last_sale, next, requests, sku) = (
            shared.clone(),
            client.clone(),
            done.clone(),
            ending.clone(),
            last_sale.clone(),
            next.clone(),
            requests.clone(),
            sku.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) && !shared.stop.load(Ordering::Relaxed) {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let request = buy(&shared, &client, variant, &sku, format!("{sku}-{n}")).await;
                let settled = request.settled();
                requests
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(request);
                if let Got::Sold(_) = settled {
                    *last_sale.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
                } else if settled == Got::Busy {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                } else if settled == Got::SoldOut
                    // A mark may refuse with stock left: the ledger says.
                    && shared.client.state(&sku).await.is_ok_and(|s| s.remaining <= 0)
                {
                    *ending.lock().unwrap_or_else(|p| p.into_inner()) = Ending::SoldOut;
                    done.store(true, Ordering::Relaxed);
                }
                let unsold = last_sale
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .elapsed();
                if unsold.min(shared.quiet_for()) > stall {
                    let mut ending = ending.lock().unwrap_or_else(|p| p.into_inner());
                    if *ending != Ending::SoldOut {
                        *ending = Ending::Stalled;
                    }
                    done.store(true, Ordering::Relaxed);
                }
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    let requests = std::mem::take(&mut *requests.lock().unwrap_or_else(|p| p.into_inner()));
    let ending = *ending.lock().unwrap_or_else(|p| p.into_inner());
    let recorder = client.recorder().cloned().unwrap_or_default();
    let clock_ns = (shared.started.elapsed().as_nanos() as u64).saturating_sub(recorder.now());
    Round {
        variant,
        sku,
        from_ms,
        to_ms: shared.ms(),
        ending,
        requests,
        recorder,
        clock_ns,
    }
}

/// The SKU's ledger, read again while the stack cannot answer (a fault
/// struck meanwhile: Redis restarting, loading its data) for up to 2 min.
/// Read through the round's recording client: the books its history
/// ends with.
pub(super) async fn read_state(
    client: &StackClient,
    sku: &str,
) -> anyhow::Result<crate::wire::StateSnapshot> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        match client.read_books(sku).await {
            Err(_) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
            read => return read,
        }
    }
}
