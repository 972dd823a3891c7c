//! The order pipeline in a replay (`lua-then-queue`, `lua-stream`).
//!
//! The model's worker moves only when its trace says so, and none of the
//! order cells' shortest counterexamples moves it: the live workers are
//! held before the first buyer goes ([`crate::gate::workers`]) and let go
//! only when the trace is played. A crashed buyer is held at its gate
//! (`before_enqueue`) until the verdict is read, as good as dead. Redis
//! losing its data is the chaos restart of the Redis `up` started (it
//! comes back empty, the hold with it), then the model's reset of the SKU.
//! The verdict on "every sale reaches its order": once the pipeline
//! settled, a unit the ledger sold with no order (reconcile's `lost`), or
//! a buyer told `sold` whose order cannot be found by its request id.

use std::time::{Duration, Instant};

use anyhow::bail;
use redis::AsyncCommands;

use super::live::{Live, name};
use crate::gate::{Scheduler, workers};

/// How long the workers have to say they are held, and the pipeline to
/// settle after they are let go.
const SETTLE: Duration = Duration::from_secs(15);
/// How often a settling pipeline, or a restarting Redis, is looked at
/// (neither announces itself to a replay).
const POLL: Duration = Duration::from_millis(50);
/// Set before Redis loses its data: gone, the Redis is the new one.
const MARKER: &str = "{stocklock:gate}:replay:before-the-loss";

/// `sku`'s books on `stack` once its pipeline settled (nothing in flight),
/// [`SETTLE`] at most.
pub(crate) async fn settled(
    stack: &crate::harness::stack::Stack,
    sku: &str,
) -> anyhow::Result<crate::wire::Reconciliation> {
    let started = Instant::now();
    loop {
        let books = stack.client.orders(sku).await?.reconciliation;
        if books.in_flight == 0 {
            return Ok(books);
        }
        if started.elapsed() > SETTLE {
            bail!(
                "the pipeline did not settle within {SETTLE:?}: {} in flight",
                books.in_flight
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A connection with no response timeout (a `BLPOP` waits on it).
async fn blocking(url: &str) -> anyhow::Result<redis::aio::MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    Ok(redis::Client::open(url)?
        .get_multiplexed_async_connection_with_config(&config)
        .await?)
}

impl Live<'_> {
    /// Holds every instance's worker, and waits until each said so.
    pub(super) async fn hold_workers(&mut self) -> anyhow::Result<()> {
        let mut conn = blocking(&self.redis_url).await?;
        workers::hold(&mut conn).await?;
        let count = self.stack.instances.len();
        let held = workers::await_held(&mut conn, count, SETTLE).await?;
        if held.len() < count {
            bail!(
                "{} of {count} order workers said they were held within {SETTLE:?} (is the stack's --orders on?)",
                held.len()
            );
        }
        Ok(())
    }

    /// Redis restarts with nothing kept, and the SKU is reset: the model's
    /// data loss.
    pub(super) async fn lose_redis_data(&mut self) -> anyhow::Result<String> {
        let mut conn = blocking(&self.redis_url).await?;
        let _: () = conn.set(MARKER, 1).await?;
        self.stack
            .client
            .chaos(&crate::wire::ChaosAction::RestartRedis)
            .await?;
        let started = Instant::now();
        let back = loop {
            if started.elapsed() > SETTLE {
                bail!("Redis did not come back empty within {SETTLE:?}");
            }
            tokio::time::sleep(POLL).await;
            let Ok(mut conn) = blocking(&self.redis_url).await else {
                continue;
            };
            if let Ok(false) = conn.exists::<_, bool>(MARKER).await {
                break conn;
            }
        };
        drop(back);
        // The instances reconnect by themselves: a reset goes through once they did.
        let stock = i64::from(self.sale.bounds.stock);
        // A new stocking: the history starts a new stock of the SKU.
        let recording = self.stack.client.recording(self.recorder.clone());
        while let Err(err) = recording.reset(&self.sku, stock, 0).await {
            if started.elapsed() > SETTLE {
                return Err(err.context("no reset after Redis came back"));
            }
            tokio::time::sleep(POLL).await;
        }
        // The run's keys went with the data: the scheduler starts again.
        self.scheduler = Scheduler::start(&self.redis_url, &self.run).await?;
        Ok(format!(
            "Redis restarts empty (back in {} ms, the stream and the workers' hold gone); the SKU is reset",
            started.elapsed().as_millis()
        ))
    }

    /// Lets the workers go, waits for the pipeline to settle, and says
    /// which sales have no order.
    pub(super) async fn judge_orders(&mut self) -> anyhow::Result<(String, bool)> {
        let mut conn = blocking(&self.redis_url).await?;
        workers::let_go(&mut conn).await?;
        let books = settled(self.stack, &self.sku).await?;
        let mut unordered = Vec::new();
        for (n, answer) in &self.answers {
            let (Some(token), true) = (answer.order_token(), answer.sold()) else {
                continue;
            };
            let id = self.request_id(*n);
            let found = self.stack.client.find_order(&self.sku, &id, token).await?;
            if found.is_none() {
                unordered.push(format!("{}'s", name(*n)));
            }
        }
        unordered.sort();
        let said = format!(
            "sold {} in the ledger, units with no order {:?}; sales answered sold with no order: {}",
            books.sold,
            books.lost,
            match unordered.is_empty() {
                true => "none".to_owned(),
                false => unordered.join(", "),
            }
        );
        Ok((said, !books.lost.is_empty() || !unordered.is_empty()))
    }

    /// Buyer `n`'s request id (order cells send one: an order is found by it).
    pub(super) fn request_id(&self, n: u8) -> String {
        format!("{}-{}", self.run, name(n))
    }
}
