//! The order pipeline in a schedule (`lua-then-queue`, `lua-stream`).
//!
//! The model's worker moves as a step of the schedule; so do the live
//! ones. The instances' workers are given turns through the schedule's
//! run ([`workers::give_turns`]): each waits at the top of its loop, and
//! a turn (`Work`) reads what the stream has, claiming every message left
//! pending (the explorer's own stack runs with a claim idle time of 1 ms:
//! a dead worker's messages are another's at its next turn), commits, and
//! stops after each scheduled buyer's commit until its ack is chosen
//! (`Ack`). A worker that dies there (`WorkerCrash`) is never let go
//! again. The instances' expiry passes are held with the workers: the
//! explorer lets a reservation run out (`Overdue`: its `pay_by` set in the
//! past, then a pass asked for), and the pass stops before it gives the
//! unit back (`GiveBack`); a buyer may pay first (`Pay`). PostgreSQL is
//! the explorer's own, stopped and started again (`PostgresStop`,
//! `PostgresStart`). Redis losing its data is, as the SKU sees it, its
//! keys gone with the stream and a reset (`DataLoss`).
//!
//! Judged once the pipeline settled (every worker free again but a dead
//! one): the books reconciled, and every buyer told `sold` has its order.

mod steps;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};

use super::Run;
use crate::check::order::OrderFaults;
use crate::gate::{ANSWERED, Arrival, points, workers};
use crate::up::postgres::PostgresServer;

/// The explorer's own PostgreSQL, which a schedule stops and starts.
pub type Postgres = Arc<tokio::sync::Mutex<PostgresServer>>;

/// How long the pipeline may take to settle once a schedule is over.
const SETTLE: Duration = Duration::from_secs(15);
/// How often a settling pipeline is looked at (nothing announces it).
const POLL: Duration = Duration::from_millis(50);
/// Who announces the answer of the expiry pass the explorer asked for.
const PASS: &str = "@expiry";

/// One instance's worker, as the explorer knows it.
enum Worker {
    /// On its way: to a buyer's gate, or back to the top of its loop.
    Busy,
    /// At the top of its loop, waiting for a turn.
    Idle(Arrival),
    /// After committing a scheduled buyer's order, before its ack.
    AtGate(Arrival),
    /// Died there: never let go again (until the schedule is over).
    Dead,
}

/// The pipeline of one schedule.
pub(in crate::explore) struct Pipeline {
    workers: BTreeMap<String, Worker>,
    /// Expiry passes held before giving a buyer's unit back.
    give_backs: Vec<Arrival>,
    /// The pass the explorer asked for has not answered.
    passing: bool,
    postgres: Option<Postgres>,
    down: bool,
    /// What the schedule may still strike.
    left: OrderFaults,
    sku: String,
    stream: String,
    run: String,
    gates: String,
}

impl Pipeline {
    /// The pipeline of a schedule of run `run` on `sku`, whose faults are
    /// `faults`, with the stack's workers (one per instance).
    pub(in crate::explore) fn new(
        run: &Run<'_>,
        (run_id, sku): (&str, &str),
        faults: OrderFaults,
        (gates, postgres): (&str, Option<Postgres>),
    ) -> anyhow::Result<Pipeline> {
        if faults != OrderFaults::default() && postgres.is_none() {
            bail!("{}", super::super::matrix::ORDER_FAULTS_NEED_OWN_STACK);
        }
        Ok(Pipeline {
            workers: (run.stack.instances.iter())
                .map(|i| (i.name.clone(), Worker::Busy))
                .collect(),
            give_backs: Vec::new(),
            passing: false,
            postgres,
            down: false,
            left: faults,
            sku: sku.to_owned(),
            stream: run.keys.orders.clone(),
            run: run_id.to_owned(),
            gates: gates.to_owned(),
        })
    }

    /// Whether a worker, or the pass, is on its way. While PostgreSQL is
    /// down a worker let go (after its ack) may be on no way at all: its
    /// batch's next insert failed, and it waits for PostgreSQL, trying
    /// again, as the model's worker whose insert fails; it gets to its
    /// turn once PostgreSQL is started again.
    pub(in crate::explore) fn busy(&self) -> bool {
        (!self.down && self.workers.values().any(|w| matches!(w, Worker::Busy)))
            || (self.passing && self.give_backs.is_empty())
    }

    /// Takes `arrival` if it is the pipeline's: `false` when it is not.
    fn heard(&mut self, arrival: &Arrival) -> bool {
        let worker = |name: &str| name.split_once('@').map(|(_, w)| w.to_owned());
        match arrival.gate.as_str() {
            gate if gate == workers::TURN.name && arrival.buyer.starts_with('@') => {
                if let Some(w) = worker(&arrival.buyer) {
                    self.workers.insert(w, Worker::Idle(arrival.clone()));
                }
            }
            gate if gate == points::WORKER_COMMITTED.name => {
                if let Some(w) = worker(&arrival.buyer) {
                    self.workers.insert(w, Worker::AtGate(arrival.clone()));
                }
            }
            gate if gate == points::BEFORE_GIVE_BACK.name => self.give_backs.push(arrival.clone()),
            ANSWERED if arrival.buyer == PASS => self.passing = false,
            _ => return false,
        }
        true
    }

    async fn gates(&self) -> anyhow::Result<redis::aio::MultiplexedConnection> {
        let client = redis::Client::open(self.gates.as_str())?;
        Ok(client.get_multiplexed_async_connection().await?)
    }

    async fn postgres(&self) -> anyhow::Result<tokio::sync::MutexGuard<'_, PostgresServer>> {
        Ok(self
            .postgres
            .as_ref()
            .context("the explorer's own PostgreSQL")?
            .lock()
            .await)
    }

    /// The buyers whose reservation of `epoch` waits for its payment, not
    /// overdue.
    async fn reserved(&self, epoch: i64) -> anyhow::Result<BTreeSet<String>> {
        let url = self.postgres().await?.url();
        let db = crate::orders::connect(&url).await?;
        let rows = db
            .query(
                "SELECT request_id FROM orders WHERE sku = $1 AND epoch = $2
                 AND status = 'pending_payment' AND pay_by >= clock_timestamp()",
                &[&self.sku, &epoch],
            )
            .await?;
        let prefix = format!("{}-", self.run);
        Ok(rows
            .iter()
            .filter_map(|row| row.get::<_, Option<String>>(0))
            .filter_map(|id| id.strip_prefix(&prefix).map(str::to_owned))
            .collect())
    }
}

/// The SKU's epoch (its orders name it: a seed explored again sends the
/// same request ids).
async fn epoch(store: &crate::store::Store, keys: &crate::store::Keys) -> anyhow::Result<i64> {
    let mut conn = store.conn().await?;
    let epoch: i64 = redis::cmd("HGET")
        .arg(&keys.ledger)
        .arg("epoch")
        .query_async(&mut conn)
        .await?;
    Ok(epoch)
}

/// Each buyer answered `sold`, with its order found by its request id and
/// token (`None`: a sale lost on its way to its order).
pub(in crate::explore) async fn orders_of(
    run: &Run<'_>,
    sku: &str,
    answers: &[(u8, crate::client::Deduction)],
    request_id: impl Fn(u8) -> Option<String>,
) -> anyhow::Result<Vec<(u8, Option<crate::wire::OrderView>)>> {
    let mut orders = Vec::new();
    for (n, answer) in answers {
        let (true, Some(token), Some(id)) = (answer.sold(), answer.order_token(), request_id(*n))
        else {
            continue;
        };
        orders.push((*n, run.stack.client.find_order(sku, &id, token).await?));
    }
    Ok(orders)
}
