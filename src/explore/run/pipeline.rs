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

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::super::{Choice, STALL, STOCK, index};
use super::{Buyer, Run};
use crate::check::order::OrderFaults;
use crate::gate::{ANSWERED, Arrival, points, workers};
use crate::up::postgres::PostgresServer;
use crate::wire::Reconciliation;

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

impl Run<'_> {
    /// Hears `arrival` if it is the order pipeline's (a worker, the pass):
    /// `true` when it was.
    pub(in crate::explore) fn heard_by_pipeline(&mut self, arrival: &Arrival) -> bool {
        self.pipeline.as_mut().is_some_and(|p| p.heard(arrival))
    }

    /// Gives the workers turns through this schedule's run, and waits
    /// until each waits for its first.
    pub(in crate::explore) async fn start_pipeline(&mut self) -> anyhow::Result<()> {
        let Some(pipeline) = &self.pipeline else {
            return Ok(());
        };
        workers::give_turns(&mut pipeline.gates().await?, &pipeline.run).await?;
        let started = Instant::now();
        while self.pipeline.as_ref().is_some_and(Pipeline::busy) {
            let left = STALL.saturating_sub(started.elapsed());
            match self.scheduler.next(left).await? {
                Some(arrival) => self.heard(arrival).await?,
                None => bail!("the order workers did not all wait for a turn within {STALL:?}"),
            }
        }
        Ok(())
    }

    /// The pipeline's steps now: those that must come before the schedule
    /// ends (turns, acks, give-backs, PostgreSQL started again, each
    /// reservation paid or run out), and the faults it may still strike.
    pub(in crate::explore) async fn pipeline_steps(
        &self,
    ) -> anyhow::Result<(Vec<Choice>, Vec<Choice>)> {
        let (mut flow, mut faults) = (Vec::new(), Vec::new());
        let Some(p) = &self.pipeline else {
            return Ok((flow, faults));
        };
        let mut conn = self.store.conn().await?;
        let waiting: i64 = redis::cmd("XLEN")
            .arg(&p.stream)
            .query_async(&mut conn)
            .await?;
        for (worker, state) in &p.workers {
            match state {
                Worker::Idle(_) if waiting > 0 && !p.down => flow.push(Choice::Work {
                    worker: worker.clone(),
                }),
                Worker::AtGate(arrival) => {
                    let buyer = arrival.buyer.split('@').next().unwrap_or_default();
                    let (buyer, worker) = (buyer.to_owned(), worker.clone());
                    if p.left.worker_crashes > 0 {
                        faults.push(Choice::WorkerCrash {
                            buyer: buyer.clone(),
                            worker: worker.clone(),
                        });
                    }
                    flow.push(Choice::Ack { buyer, worker });
                }
                _ => {}
            }
        }
        flow.extend((p.give_backs.iter()).map(|a| Choice::GiveBack {
            buyer: a.buyer.clone(),
        }));
        match p.down {
            true => flow.push(Choice::PostgresStart),
            false if p.left.postgres_stops > 0 => faults.push(Choice::PostgresStop),
            false => {}
        }
        if p.left.reservations && !p.down && !p.passing {
            let epoch = epoch(&self.store, &self.keys).await?;
            for buyer in p.reserved(epoch).await? {
                let answered = matches!(
                    self.buyers.get(&index(&buyer)),
                    Some(Buyer::Done(answer)) if answer.order_token().is_some()
                );
                if answered {
                    flow.push(Choice::Pay {
                        buyer: buyer.clone(),
                    });
                }
                flow.push(Choice::Overdue { buyer });
            }
        }
        if p.left.data_losses > 0 && waiting > 0 {
            faults.push(Choice::DataLoss);
        }
        Ok((flow, faults))
    }

    /// Takes one of the pipeline's steps.
    pub(in crate::explore) async fn pipeline_step(&mut self, step: &Choice) -> anyhow::Result<()> {
        let p = self.pipeline.as_mut().context("an order pipeline")?;
        match step {
            Choice::Work { worker } | Choice::Ack { worker, .. } => {
                let Some(Worker::Idle(arrival) | Worker::AtGate(arrival)) =
                    p.workers.insert(worker.clone(), Worker::Busy)
                else {
                    bail!("worker {worker} waits nowhere");
                };
                self.scheduler.release(&arrival).await?;
            }
            Choice::WorkerCrash { worker, .. } => {
                p.left.worker_crashes -= 1;
                p.workers.insert(worker.clone(), Worker::Dead);
            }
            Choice::GiveBack { buyer } => {
                let at = (p.give_backs.iter())
                    .position(|a| &a.buyer == buyer)
                    .context("a pass held before the buyer's give-back")?;
                let arrival = p.give_backs.remove(at);
                self.scheduler.release(&arrival).await?;
            }
            Choice::PostgresStop => {
                p.left.postgres_stops -= 1;
                p.down = true;
                p.postgres().await?.stop().await;
            }
            Choice::PostgresStart => {
                p.down = false;
                p.postgres().await?.restart().await?;
            }
            Choice::Pay { buyer } => {
                let n = index(buyer);
                let Some(Buyer::Done(answer)) = self.buyers.get(&n) else {
                    bail!("{buyer} has no answer to pay with");
                };
                let token = answer.order_token().context("an order token")?.to_owned();
                let id = format!("{}-{buyer}", p.run);
                let order = (self.stack.client.find_order(&p.sku, &id, &token).await?)
                    .with_context(|| format!("{buyer}'s order"))?;
                let paid = self.stack.client.pay(order.id, &token).await;
                if paid != 200 {
                    bail!("{buyer}'s payment was answered {paid}");
                }
            }
            Choice::Overdue { buyer } => {
                let url = p.postgres().await?.url();
                let db = crate::orders::connect(&url).await?;
                let id = format!("{}-{buyer}", p.run);
                let epoch = epoch(&self.store, &self.keys).await?;
                db.execute(
                    "UPDATE orders SET pay_by = clock_timestamp() - interval '1 millisecond'
                     WHERE sku = $1 AND epoch = $2 AND request_id = $3
                     AND status = 'pending_payment'",
                    &[&p.sku, &epoch, &id],
                )
                .await?;
                p.passing = true;
                let answers = self.scheduler.answers().await?;
                let client = self.stack.client.at(&self.stack.instances[0].url);
                tokio::spawn(async move {
                    if let Err(err) = client.expire_orders().await {
                        tracing::warn!("explore: the expiry pass failed: {err:#}");
                    }
                    let _ = answers.answered(PASS).await;
                });
            }
            Choice::DataLoss => {
                p.left.data_losses -= 1;
                let sku = p.sku.clone();
                self.stack.client.reset(&sku, STOCK, 0).await?;
            }
            other => bail!("{other:?} is not a step of the order pipeline"),
        }
        Ok(())
    }

    /// Once the schedule is over: PostgreSQL up, the workers free (a dead
    /// one excepted), the pipeline settled; its books.
    pub(in crate::explore) async fn settle_pipeline(
        &mut self,
    ) -> anyhow::Result<Option<Reconciliation>> {
        let Some(p) = self.pipeline.as_mut() else {
            return Ok(None);
        };
        if p.down {
            p.down = false;
            p.postgres().await?.restart().await?;
        }
        workers::let_go(&mut p.gates().await?).await?;
        let mut free = Vec::new();
        for state in p.workers.values_mut() {
            if let Worker::Idle(a) | Worker::AtGate(a) = std::mem::replace(state, Worker::Busy) {
                free.push(a);
            }
        }
        free.append(&mut p.give_backs);
        let sku = p.sku.clone();
        for arrival in free {
            self.scheduler.release(&arrival).await?;
        }
        let started = Instant::now();
        loop {
            // Whatever a worker or a pass reaches now goes on at once.
            while let Some(arrival) = self.scheduler.next(POLL).await? {
                if self.heard_by_pipeline(&arrival) && arrival.gate != ANSWERED {
                    self.scheduler.release(&arrival).await?;
                }
            }
            let passing = self.pipeline.as_ref().is_some_and(|p| p.passing);
            let books = self.stack.client.orders(&sku).await?.reconciliation;
            if books.in_flight == 0 && !passing {
                return Ok(Some(books));
            }
            if started.elapsed() > SETTLE {
                bail!(
                    "the order pipeline did not settle within {SETTLE:?}: {} in flight",
                    books.in_flight
                );
            }
        }
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
