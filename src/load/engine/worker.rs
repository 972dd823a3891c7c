//! One worker of the engine: one connection at a time, one request at a
//! time, each answer counted in its own tally and, with `--history`, what
//! its buyer was told recorded.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::Tickets;
use super::tally::Tally;
use crate::history::{Recorder, Told};
use crate::load::http1::{Answer, Connection, Prepared};

/// One worker: one connection at a time, one request at a time.
pub(super) struct Worker {
    pub(super) addr: SocketAddr,
    /// What to send; ticket n sends request n mod their number.
    pub(super) requests: Arc<[Prepared]>,
    pub(super) timeout: Duration,
    pub(super) rate: Option<f64>,
    pub(super) done: Arc<AtomicU64>,
    /// The recorder, and the SKU of each request (by its query).
    pub(super) history: Option<(Recorder, Arc<[String]>)>,
}

/// The `sku` of a request path's query (empty when it has none).
pub(super) fn sku_of(path: &str) -> String {
    let query = path.split_once('?').map_or("", |(_, q)| q);
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("sku="))
        .unwrap_or_default()
        .to_owned()
}

impl Worker {
    pub(super) async fn run(&self, tickets: &Tickets) -> Tally {
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
