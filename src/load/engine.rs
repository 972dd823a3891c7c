//! The request engine: N workers, each with its own keep-alive HTTP/1.1
//! connection, released together at one instant, counting answers by kind
//! and latency in an HDR histogram.
//!
//! It is built to never be the bottleneck, and to leave the servers it
//! measures as much of a small machine as it can: one connection per worker
//! (no pool to contend on), each request prepared once as bytes and written
//! with one system call, answers read into the connection's own buffer by
//! a small HTTP/1.1 client (`load/http1.rs`) in the worker's own task, and
//! each worker keeps its own counters and histogram until the end.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;
use hyper::Method;
use tokio::sync::Barrier;
use tokio::time::Instant;

use super::http1::{Answer, Connection, Prepared};
use crate::history::{Recorder, Told};

/// Where to send the requests.
#[derive(Clone, Debug)]
pub struct Target {
    pub addr: SocketAddr,
    /// The `Host` header (`host:port` of the URL).
    pub authority: String,
}

/// How much load, and of what shape.
#[derive(Clone, Debug)]
pub struct Plan {
    pub method: Method,
    /// Paths and queries, e.g. `/deductStock/lua?sku=lua`: request n of the
    /// run goes to path n mod their number (many SKUs: one path each).
    pub paths: Vec<String>,
    pub concurrency: usize,
    /// Stop after this many requests ...
    pub requests: Option<u64>,
    /// ... or after this long (whichever comes first).
    pub duration: Option<Duration>,
    /// Open loop: start requests at this rate (per second) regardless of
    /// answers; `None` is a closed loop (each worker sends as soon as its
    /// last answer came).
    pub rate: Option<f64>,
    /// Per request, connecting included.
    pub timeout: Duration,
    /// Records what every request was told (`--history`); each worker is a
    /// client of its own.
    pub history: Option<Recorder>,
}

pub use crate::wire::ErrorCounts as Errors;

/// What a run produced, as the client saw it.
#[derive(Clone, Debug)]
pub struct Tally {
    pub requests: u64,
    /// 200
    pub sold: u64,
    /// 409
    pub sold_out: u64,
    /// 429
    pub busy: u64,
    /// 503 with `"outcome":"unknown"`: the write was sent, no answer came.
    pub unknown: u64,
    /// 2xx other than 200 (e.g. /healthz counts here)
    pub ok_other: u64,
    pub errors: Errors,
    pub elapsed: Duration,
    /// Latency in microseconds, of answered requests.
    pub latency_us: Histogram<u64>,
}

impl Tally {
    pub(crate) fn new() -> Self {
        Self {
            requests: 0,
            sold: 0,
            sold_out: 0,
            busy: 0,
            unknown: 0,
            ok_other: 0,
            errors: Errors::default(),
            elapsed: Duration::ZERO,
            latency_us: new_histogram(),
        }
    }

    fn merge(&mut self, other: &Tally) {
        self.requests += other.requests;
        self.sold += other.sold;
        self.sold_out += other.sold_out;
        self.busy += other.busy;
        self.unknown += other.unknown;
        self.ok_other += other.ok_other;
        let e = &other.errors;
        self.errors.connect += e.connect;
        self.errors.timeout += e.timeout;
        self.errors.server += e.server;
        self.errors.other += e.other;
        let _ = self.latency_us.add(&other.latency_us);
    }

    /// Answered requests per second over the whole run.
    pub fn rps(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.requests as f64 / secs
        } else {
            0.0
        }
    }

    /// A latency quantile in milliseconds.
    pub fn latency_ms(&self, quantile: f64) -> f64 {
        if self.latency_us.is_empty() {
            return 0.0;
        }
        self.latency_us.value_at_quantile(quantile) as f64 / 1000.0
    }

    pub fn max_latency_ms(&self) -> f64 {
        self.latency_us.max() as f64 / 1000.0
    }

    fn count(&mut self, answer: Answer) {
        match answer.status {
            200 => self.sold += 1,
            409 => self.sold_out += 1,
            429 => self.busy += 1,
            503 if answer.unknown => self.unknown += 1,
            201..=299 => self.ok_other += 1,
            500..=599 => self.errors.server += 1,
            _ => self.errors.other += 1,
        }
    }
}

fn new_histogram() -> Histogram<u64> {
    // 1 µs to 10 minutes at 3 significant digits.
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

/// Requests done so far, for a progress display.
#[derive(Clone, Default)]
pub struct Progress(Arc<AtomicU64>);

impl Progress {
    pub fn done(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Hands out request numbers until the plan's count or deadline is reached.
struct Tickets {
    next: AtomicU64,
    limit: u64,
    duration: Option<Duration>,
    /// The flash-sale instant, set once before the workers are released.
    start: std::sync::OnceLock<Instant>,
}

impl Tickets {
    fn start(&self) -> Instant {
        *self.start.get().expect("set before the barrier opens")
    }

    /// The next request's number, unless the count is reached or, at
    /// `now`, the run's time is up.
    fn take(&self, now: Instant) -> Option<u64> {
        if let Some(duration) = self.duration
            && now.duration_since(self.start()) >= duration
        {
            return None;
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        (n < self.limit).then_some(n)
    }
}

/// Runs the plan and returns the merged tally.
///
/// Workers are spread over one single-threaded runtime per core: no work
/// stealing and no cross-thread wake-ups on the hot path, which on a small
/// machine leaves more CPU to the servers being measured.
///
/// Panics when a path of the plan is not a request path (callers build
/// them, or check the user's `--path` with the rules requests are prepared by first).
pub async fn run(target: &Target, plan: &Plan, progress: &Progress) -> Tally {
    let concurrency = plan.concurrency.max(1);
    // One worker thread per core measured fastest here: a single thread (2
    // cores, perf stat) spent as much CPU per request and answered no faster.
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(concurrency);
    let barrier = Arc::new(Barrier::new(concurrency + 1));
    let tickets = Arc::new(Tickets {
        next: AtomicU64::new(0),
        limit: plan.requests.unwrap_or(u64::MAX),
        duration: plan.duration,
        start: std::sync::OnceLock::new(),
    });
    let requests: Arc<[Prepared]> = plan
        .paths
        .iter()
        .map(|path| {
            Prepared::new(&plan.method, path, &target.authority)
                .unwrap_or_else(|err| panic!("the plan's paths are request paths: {err}"))
        })
        .collect();
    let mut results = Vec::with_capacity(threads);
    for thread in 0..threads {
        let workers = concurrency / threads + usize::from(thread < concurrency % threads);
        let worker = Worker {
            addr: target.addr,
            requests: requests.clone(),
            timeout: plan.timeout,
            rate: plan.rate,
            done: progress.0.clone(),
            history: plan.history.clone().map(|recorder| {
                let skus = plan.paths.iter().map(|p| sku_of(p)).collect();
                (recorder, skus)
            }),
        };
        let (barrier, tickets) = (barrier.clone(), tickets.clone());
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name(format!("load-{thread}"))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime for the load workers");
                let tally = runtime.block_on(async move {
                    let worker = Arc::new(worker);
                    let mut tasks = Vec::with_capacity(workers);
                    for _ in 0..workers {
                        let (worker, barrier, tickets) =
                            (worker.clone(), barrier.clone(), tickets.clone());
                        tasks.push(tokio::spawn(async move {
                            barrier.wait().await;
                            worker.run(&tickets).await
                        }));
                    }
                    let mut tally = Tally::new();
                    for task in tasks {
                        if let Ok(part) = task.await {
                            tally.merge(&part);
                        }
                    }
                    tally
                });
                let _ = tx.send(tally);
            })
            .expect("a thread for the load workers");
        results.push(rx);
    }

    // The flash-sale instant: every worker starts at once, like a JMeter
    // thread group with zero ramp-up.
    let begin = Instant::now();
    let _ = tickets.start.set(begin);
    barrier.wait().await;

    let mut total = Tally::new();
    for result in results {
        if let Ok(part) = result.await {
            total.merge(&part);
        }
    }
    total.elapsed = begin.elapsed();
    total
}

/// One worker: one connection at a time, one request at a time.
struct Worker {
    addr: SocketAddr,
    /// What to send; ticket n sends request n mod their number.
    requests: Arc<[Prepared]>,
    timeout: Duration,
    rate: Option<f64>,
    done: Arc<AtomicU64>,
    /// The recorder, and the SKU of each request (by its query).
    history: Option<(Recorder, Arc<[String]>)>,
}

/// The `sku` of a request path's query (empty when it has none).
fn sku_of(path: &str) -> String {
    let query = path.split_once('?').map_or("", |(_, q)| q);
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("sku="))
        .unwrap_or_default()
        .to_owned()
}

impl Worker {
    async fn run(&self, tickets: &Tickets) -> Tally {
        let start = tickets.start();
        let mut tally = Tally::new();
        let mut conn: Option<Connection> = None;
        // Progress is shared across threads: publish it in batches.
        let mut unreported = 0;
        // One timer for the worker's whole life, moved only when it fires:
        // arming a fresh one per request costs more than the request.
        let timer = tokio::time::sleep(self.timeout);
        tokio::pin!(timer);
        let client = self
            .history
            .as_ref()
            .map_or(0, |(recorder, _)| recorder.client());
        let mut now = Instant::now();
        while let Some(n) = tickets.take(now) {
            // Open loop: the request is due at its slot, and its latency
            // counts from then, so a slow server cannot hide its queueing
            // (no coordinated omission).
            let (due, sent) = match self.rate {
                Some(rate) => {
                    let due = start + Duration::from_secs_f64(n as f64 / rate);
                    tokio::time::sleep_until(due).await;
                    (due, Instant::now())
                }
                None => (now, now),
            };
            let outcome = {
                let deadline = sent + self.timeout;
                let request = &self.requests[(n % self.requests.len() as u64) as usize];
                let exchange = self.send(&mut conn, request);
                tokio::pin!(exchange);
                loop {
                    tokio::select! {
                        biased;
                        answer = &mut exchange => break Ok(answer),
                        _ = &mut timer => {
                            if Instant::now() >= deadline {
                                break Err(());
                            }
                            // It was armed for an earlier request.
                            timer.as_mut().reset(deadline);
                        }
                    }
                }
            };
            // One clock reading ends this request and starts the next.
            now = Instant::now();
            tally.requests += 1;
            if let Some((recorder, skus)) = &self.history {
                let told = match &outcome {
                    Ok(Ok(answer)) => Told::from_answer(answer.status, answer.unknown, answer.unit),
                    // Refused before anything was sent.
                    Ok(Err(SendError::Connect)) => Told::Refused,
                    // Sent, and no whole answer: it may have happened.
                    Ok(Err(SendError::Broken)) | Err(()) => Told::Nothing,
                };
                let sku = &skus[(n % skus.len() as u64) as usize];
                let call = recorder.call_at(sku, sent.into_std());
                recorder.told_at(call, client, None, told, now.into_std());
            }
            match outcome {
                Ok(Ok(answer)) => {
                    tally.count(answer);
                    let micros = now
                        .saturating_duration_since(due)
                        .as_micros()
                        .clamp(1, 600_000_000) as u64;
                    let _ = tally.latency_us.record(micros);
                    if !answer.keep_alive {
                        conn = None;
                    }
                }
                Ok(Err(SendError::Connect)) => {
                    tally.errors.connect += 1;
                    conn = None;
                }
                Ok(Err(SendError::Broken)) => {
                    tally.errors.other += 1;
                    conn = None;
                }
                Err(()) => {
                    tally.errors.timeout += 1;
                    conn = None;
                }
            }
            unreported += 1;
            if unreported == 16 {
                self.done.fetch_add(unreported, Ordering::Relaxed);
                unreported = 0;
            }
        }
        self.done.fetch_add(unreported, Ordering::Relaxed);
        tally
    }

    /// Sends one request on the worker's connection, opening one if needed,
    /// and reads the whole answer. Never retried: a sale may not be sent twice.
    async fn send(
        &self,
        conn: &mut Option<Connection>,
        request: &Prepared,
    ) -> Result<Answer, SendError> {
        if !conn.as_ref().is_some_and(Connection::reusable) {
            *conn = Some(
                Connection::open(self.addr)
                    .await
                    .map_err(|_| SendError::Connect)?,
            );
        }
        let conn = conn.as_mut().expect("connected above");
        conn.exchange(request).await.map_err(|_| SendError::Broken)
    }
}

enum SendError {
    Connect,
    Broken,
}

#[cfg(test)]
mod tests;
