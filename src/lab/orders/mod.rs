//! The order pipeline's scenarios, judged by the reconciliation of the
//! ledger with the orders in PostgreSQL (`judge::books`).
//!
//! Each cell runs on a stack of its own: orders on, chaos mode, two
//! instances, `--claim-idle 1s` (a dead worker's messages are claimed by
//! the live one after a second); `reservation-expiry` with
//! `--pay-within 2s`; `postgres-restart` on a PostgreSQL of the lab's own,
//! which it stops and starts again itself (as `redis-restart` does its
//! Redis), so buyers buy while it is down for certain. SKU stock 10.
//!
//! - `crash-before-enqueue`: two sales; chaos `crash_before_enqueue` armed;
//!   a sale sent to instance a itself, which crashes right after the sale's
//!   script; `up` restarts it; two more sales on instance b.
//! - `worker-crash-before-ack`: chaos `worker_crash_before_ack` armed; four
//!   sales at once; the first worker to commit aborts before its XACK, and
//!   `up` restarts its instance; a sale that got no answer is retried with
//!   its request id once the instance is back.
//! - `postgres-restart`: two sales, written; PostgreSQL stopped (fast
//!   shutdown); three sales; PostgreSQL started again on its port, with its
//!   data.
//! - `reservation-expiry`: six sales with request ids; each one's order
//!   found, three paid; once the others' deadline passed, an expiry pass
//!   (the instances run their own too), and a second one that must give
//!   nothing back.
//! - `redis-data-loss` (on a PostgreSQL of the lab's own too): two sales,
//!   written; PostgreSQL stopped; three sales, their orders in flight for
//!   certain; chaos `restart_redis` (Redis comes back empty, the stream
//!   with it); PostgreSQL started again; a reset and three sales. Judged
//!   by `judge::ledger_lost`: reconcile must report the lost ledger.
//!
//! Each then waits until the pipeline settled: no message on its way, none
//! delivered and never acked.
//!
//! This module: the cell's stack and the moves its scenarios share
//! (selling, waiting for a restart, settling); `play`: the scenarios.

mod play;

use crate::history::Recorder;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::scenario::Scenario;
use crate::client::StackClient;
use crate::harness::stack::{Instance, Stack, UpOptions};
use crate::judge::{self, Check, Judgement, Reply};
use crate::orders::message::GROUP;
use crate::orders::reconcile::Reconciliation;
use crate::said;
use crate::store::{Keys, Store};
use crate::up::postgres::PostgresServer;
use crate::variants::Variant;
use crate::wire::Said;

/// Every cell's stock.
pub(super) const STOCK: i64 = 10;
/// How long the pipeline may take to settle after a cell's fault.
pub(super) const SETTLE_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a crashed instance has to come back.
pub(super) const RESTART_TIMEOUT: Duration = Duration::from_secs(10);
/// `reservation-expiry`'s `--pay-within`.
pub(super) const PAY_WITHIN: &str = "2s";
/// How often a settling pipeline is looked at (no event says a worker wrote).
pub(super) const POLL: Duration = Duration::from_millis(50);

/// A stack of the cell's own, and the PostgreSQL the lab started for it.
pub(super) struct OrdersCell {
    pub(super) stack: Stack,
    store: Store,
    pub(super) postgres: Option<PostgresServer>,
}

/// Plays one order cell of `variant` on a stack of its own.
pub(super) async fn play(
    scenario: Scenario,
    variant: Variant,
    recorder: &Recorder,
) -> anyhow::Result<Judgement> {
    let mut cell = OrdersCell::start(scenario, recorder).await?;
    let v = variant.name();
    let books = |played: anyhow::Result<judge::Books>| played.map(|b| judge::books(&b));
    let played = match scenario {
        Scenario::CrashBeforeEnqueue => books(play::crash_before_enqueue(&mut cell, v).await),
        Scenario::WorkerCrashBeforeAck => books(play::worker_crash_before_ack(&mut cell, v).await),
        Scenario::PostgresRestart => books(play::postgres_restart(&mut cell, v).await),
        Scenario::ReservationExpiry => books(play::reservation_expiry(&cell, v).await),
        Scenario::RedisDataLoss => play::redis_data_loss(&mut cell, v)
            .await
            .map(|lost| judge::ledger_lost(&lost)),
        other => Err(anyhow::anyhow!("{other} is not an order scenario")),
    };
    cell.stack.stop().await;
    if let Some(postgres) = cell.postgres.as_mut() {
        postgres.stop().await;
    }
    played
}

impl OrdersCell {
    async fn start(scenario: Scenario, recorder: &Recorder) -> anyhow::Result<OrdersCell> {
        let postgres = match scenario {
            Scenario::PostgresRestart | Scenario::RedisDataLoss => {
                Some(PostgresServer::start(None).await?)
            }
            _ => None,
        };
        let mut args: Vec<String> = [
            "--chaos",
            "--instances",
            "2",
            "--redlock",
            "0",
            "--etcd",
            "0",
            "--zookeeper",
            "0",
            "--orders",
            "on",
            "--claim-idle",
            "1s",
        ]
        .map(str::to_owned)
        .to_vec();
        if let Some(postgres) = &postgres {
            args.extend(["--postgres-url".to_owned(), postgres.url()]);
        }
        if scenario == Scenario::ReservationExpiry {
            args.extend(["--pay-within".to_owned(), PAY_WITHIN.to_owned()]);
        }
        let mut stack = Stack::start(&UpOptions {
            args,
            ..UpOptions::default()
        })
        .await?;
        stack.client = stack.client.recording(recorder.clone());
        if postgres.is_none() && stack.postgres.is_none() {
            anyhow::bail!("stocklock up started no PostgreSQL: is it installed?");
        }
        let redis_url = stack
            .redis_url
            .clone()
            .context("the stack announced no Redis")?;
        Ok(OrdersCell {
            store: Store::open(&redis_url)?,
            stack,
            postgres,
        })
    }

    pub(super) fn client(&self) -> &StackClient {
        &self.stack.client
    }

    pub(super) fn instance(&self, index: usize) -> Instance {
        self.stack.instances[index].clone()
    }

    /// One sale at `base` (nginx, or an instance's own URL).
    pub(super) async fn sell(&self, base: &str, v: &str, request_id: &str) -> Reply {
        let path = format!("/deductStock/{v}?sku={v}&request_id={request_id}");
        Reply::from(self.client().at(base).deduct(&path).await)
    }

    /// The pid `victim` was restarted as, once `up` announced it.
    pub(super) async fn restarted(&mut self, victim: &Instance) -> Option<u32> {
        self.stack.restarted(victim, RESTART_TIMEOUT).await
    }

    /// Messages of `v`'s stream delivered to a worker and never acked.
    async fn unacked(&self, v: &str) -> anyhow::Result<i64> {
        let mut conn = self.store.conn().await?;
        let reply: Result<(i64, redis::Value, redis::Value, redis::Value), _> =
            redis::cmd("XPENDING")
                .arg(Keys::tagged_with(v).orders)
                .arg(GROUP)
                .query_async(&mut conn)
                .await;
        match reply {
            Ok((count, ..)) => Ok(count),
            // No group yet: nothing was ever delivered.
            Err(err) if err.code() == Some("NOGROUP") => Ok(0),
            Err(err) => Err(err.into()),
        }
    }

    /// Waits until `v`'s pipeline settled (nothing in flight, nothing
    /// unacked); the books then, or when [`SETTLE_TIMEOUT`] ran out, and
    /// whether it settled.
    pub(super) async fn settle(&self, v: &str) -> anyhow::Result<(Reconciliation, Check)> {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        loop {
            let books = self
                .client()
                .orders(v)
                .await
                .map(|view| view.reconciliation);
            let unacked = self.unacked(v).await;
            match look(books, unacked, Instant::now() > deadline) {
                Look::Settled(books) => return Ok((books, Ok(()))),
                Look::Unsettled(books, why) => return Ok((books, Err(why))),
                Look::Failed(err) => return Err(err),
                Look::Again => tokio::time::sleep(POLL).await,
            }
        }
    }
}

/// What one look at a settling pipeline says.
#[derive(Debug)]
enum Look {
    /// Nothing in flight, nothing unacked: these books.
    Settled(Reconciliation),
    /// Still unsettled when time ran out: these books, and why.
    Unsettled(Reconciliation, Said),
    /// Unanswered when time ran out.
    Failed(anyhow::Error),
    Again,
}

/// One look: the orders' books (from an instance) and the stream's unacked
/// messages (from Redis), each of which may fail for a while after a fault
/// (an instance restarting, PostgreSQL or Redis coming back), so a failure
/// is only an error once `late`.
fn look(books: anyhow::Result<Reconciliation>, unacked: anyhow::Result<i64>, late: bool) -> Look {
    match (books, unacked) {
        (Ok(books), Ok(0)) if books.in_flight == 0 => Look::Settled(books),
        _ if !late => Look::Again,
        (Ok(books), Ok(unacked)) => {
            let in_flight = books.in_flight;
            let why = said!(
                "after {SETTLE_TIMEOUT:?}: {in_flight} messages on their way, {unacked} delivered and never acked",
                "{SETTLE_TIMEOUT:?} 之后:{in_flight} 条消息仍在途中,{unacked} 条已投递却始终没有确认"
            );
            Look::Unsettled(books, why)
        }
        (Err(err), _) => Look::Failed(err.context("the orders never answered")),
        (_, Err(err)) => {
            Look::Failed(err.context("Redis never told the stream's unacked messages"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn books(in_flight: i64) -> anyhow::Result<Reconciliation> {
        Ok(Reconciliation {
            in_flight,
            ..Reconciliation::default()
        })
    }

    fn refused() -> anyhow::Result<i64> {
        Err(anyhow::anyhow!("Connection refused (os error 111)"))
    }

    /// CI's lab once failed `redis-data-loss` with "Connection refused" on
    /// its first XPENDING after Redis restarted (the store's stale
    /// reconnection, now sent again: `store::Conn`), and `settle` gave up
    /// at once instead of looking again.
    #[test]
    fn a_failed_look_is_looked_at_again_until_time_runs_out() {
        assert!(matches!(look(books(0), refused(), false), Look::Again));
        assert!(matches!(
            look(Err(anyhow::anyhow!("503")), Ok(0), false),
            Look::Again
        ));
        let Look::Failed(err) = look(books(0), refused(), true) else {
            panic!("a late failure is an error");
        };
        assert_eq!(
            format!("{err:#}"),
            "Redis never told the stream's unacked messages: Connection refused (os error 111)"
        );
    }

    #[test]
    fn settled_books_end_the_wait_and_unsettled_ones_only_when_late() {
        assert!(matches!(look(books(0), Ok(0), false), Look::Settled(_)));
        assert!(matches!(look(books(2), Ok(0), false), Look::Again));
        assert!(matches!(look(books(0), Ok(1), false), Look::Again));
        let Look::Unsettled(_, why) = look(books(2), Ok(1), true) else {
            panic!("late unsettled books are a verdict");
        };
        assert_eq!(
            why.en,
            "after 15s: 2 messages on their way, 1 delivered and never acked"
        );
    }
}
