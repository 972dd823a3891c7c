//! Sending a buyer's request (and sending it again), and a call cut off by
//! a paused Redis (`redis-pause`).
//!
//! A cut-off plays the model's step on the real stack: Redis sleeps
//! (`DEBUG SLEEP`, longer than the 1 s an instance waits for an answer),
//! the buyer is let go into the pause, its instance gives up and answers
//! `unknown`, and Redis wakes and runs the call's script, which was queued
//! all along. The explorer waits until Redis answers again before the next
//! step, so the queued script always runs before the buyer asks again: the
//! model's other order (the retry first) needs both calls queued in one
//! pause, whose order Redis alone decides, and is not played. The gates
//! meet in a Redis apart ([`super::Redises`]): the pause stops only the
//! stock's.

use std::time::{Duration, Instant};

use anyhow::bail;

use super::Choice;
use super::run::{Buyer, Run, name};

/// The Redis of the stack's stock, and the one its gates meet in: the same
/// one, unless the stack runs with `--gate-redis` (a schedule then goes on
/// while the stock's Redis is paused). And the orders' PostgreSQL when the
/// explorer started it (a schedule then may stop it).
#[derive(Clone)]
pub struct Redises {
    pub stock: String,
    pub gates: String,
    pub postgres: Option<super::run::pipeline::Postgres>,
}

impl Redises {
    /// Gates and stock in one Redis.
    pub fn one(url: &str) -> Redises {
        Redises {
            stock: url.to_owned(),
            gates: url.to_owned(),
            postgres: None,
        }
    }

    /// Whether the gates meet in a Redis apart.
    pub fn apart(&self) -> bool {
        self.stock != self.gates
    }
}

/// How long Redis sleeps: past the 1 s an instance waits.
const PAUSE: Duration = Duration::from_millis(1_500);

/// How many times one buyer may send its request in a schedule: a buyer
/// told `unknown` again and again (a store that never runs its call) would
/// otherwise ask for ever.
const MOST_ASKS: u8 = 5;

impl Run<'_> {
    /// Sends buyer `n`'s request (again, for a retry: the same path, its
    /// request id with it), announcing its answer among the arrivals.
    pub(super) async fn send(&mut self, n: u8) -> anyhow::Result<()> {
        let Some((client, path)) = self.requests.get(&n).cloned() else {
            bail!("no request of buyer {}", name(n));
        };
        let asks = self.asks.entry(n).or_insert(0);
        *asks += 1;
        if *asks > MOST_ASKS {
            bail!(
                "buyer {} asked {MOST_ASKS} times and was told unknown each time",
                name(n)
            );
        }
        let answers = self.scheduler.answers().await?;
        self.buyers.insert(
            n,
            Buyer::Sent(tokio::spawn(async move {
                let answer = client.deduct(&path).await;
                // Heard by the explorer's wait, as an arrival is.
                if let Err(err) = answers.answered(&name(n)).await {
                    tracing::warn!(%err, "an answer could not be announced");
                }
                answer
            })),
        );
        Ok(())
    }

    /// The buyers told `unknown` (no answer from Redis in time), each of
    /// whom asks again.
    pub(super) fn retries(&self) -> Vec<Choice> {
        let mut unknown: Vec<u8> = (self.buyers.iter())
            .filter(|(_, b)| matches!(b, Buyer::Done(a) if a.unknown()))
            .map(|(&n, _)| n)
            .collect();
        unknown.sort_unstable();
        unknown
            .into_iter()
            .map(|n| Choice::Retry { buyer: name(n) })
            .collect()
    }

    /// Where each buyer is, for a schedule that stalled: on its way (and
    /// whether it noted a wait for a lock), at a gate, answered, crashed.
    pub(super) fn whereabouts(&self) -> String {
        let mut said = Vec::new();
        for n in 0..self.count {
            let state = match self.buyers.get(&n) {
                None => "unknown to the explorer".to_owned(),
                Some(Buyer::Sent(_)) if self.blocked.contains(&n) => {
                    "on its way, waiting for the lock".to_owned()
                }
                Some(Buyer::Sent(_)) => "on its way".to_owned(),
                Some(Buyer::Waiting(arrival, _)) => format!("at {}", arrival.gate),
                Some(Buyer::Crashed(_)) => "crashed".to_owned(),
                Some(Buyer::Done(answer)) => format!("answered {}", answer.status),
            };
            said.push(format!("{} {state}", name(n)));
        }
        said.join(", ")
    }

    /// Buyer `n`'s call goes into a paused Redis: see the module's words.
    pub(super) async fn cut_off(&mut self, n: u8) -> anyhow::Result<()> {
        let (paused, mut probe) =
            crate::harness::pause::pause_redis(&self.stock_url, &self.store, PAUSE, "explore")
                .await?;
        if let Err(why) = paused {
            bail!("{why}");
        }
        self.release(n).await?;
        // Its instance's answer (`unknown`), or a gate after it.
        let deadline = Instant::now() + super::STALL;
        while let Some(Buyer::Sent(request)) = self.buyers.get(&n) {
            // (An answer whose announcement was lost is seen all the same.)
            if request.is_finished()
                && let Some(Buyer::Sent(request)) = self.buyers.remove(&n)
            {
                self.buyers.insert(n, Buyer::Done(request.await?));
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!(
                    "{} neither answered nor reached a gate in a paused Redis",
                    name(n)
                );
            }
            if let Some(arrival) = (self.scheduler)
                .next(left.min(Duration::from_millis(100)))
                .await?
            {
                self.heard(arrival).await?;
            }
        }
        // Awake: the queued script has run.
        probe.answering().await
    }
}
