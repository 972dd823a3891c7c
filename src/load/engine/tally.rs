//! What a run produced, as the client saw it: its answers counted by kind
//! and their latencies in an HDR histogram, one tally per worker merged at
//! the end.

use std::time::Duration;

use hdrhistogram::Histogram;

use super::Errors;
use crate::load::http1::Answer;

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

    pub(super) fn merge(&mut self, other: &Tally) {
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

    pub(super) fn count(&mut self, answer: Answer) {
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
