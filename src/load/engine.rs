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

use hyper::Method;
use tokio::sync::Barrier;
use tokio::time::Instant;

use super::http1::Prepared;
use crate::history::Recorder;

mod tally;
mod worker;

pub use tally::Tally;
use worker::{Worker, sku_of};

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

#[cfg(test)]
mod tests;
