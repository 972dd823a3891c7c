//! The pipeline's part of a schedule: the workers given their turns, the
//! pipeline's steps offered at each point and each one played, and the
//! pipeline settled once the schedule is over.

use std::time::Instant;

use anyhow::{Context, bail};

use super::{PASS, POLL, Pipeline, SETTLE, Worker, epoch};
use crate::explore::run::{Buyer, Run};
use crate::explore::{Choice, STALL, STOCK, index};
use crate::gate::{ANSWERED, Arrival, workers};
use crate::wire::Reconciliation;

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
