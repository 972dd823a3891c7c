//! The run's side of a schedule: the scheduler that hears arrivals and
//! lets buyers go, and the announcements of a tool's buyers' answers.

use std::time::Duration;

use redis::AsyncCommands;

use crate::store::StoreError;

use super::{ANSWERED, Arrival, RUN_TTL, RunKeys, is_note};

/// Announces a tool's buyers' answers on its run's arrivals list.
#[derive(Clone)]
pub struct Answers {
    conn: redis::aio::MultiplexedConnection,
    arrivals: String,
}

impl Answers {
    /// `buyer` has its answer.
    pub async fn answered(&self, buyer: &str) -> Result<(), StoreError> {
        let _: () = redis::pipe()
            .rpush(&self.arrivals, format!("{buyer} {ANSWERED}"))
            .pexpire(&self.arrivals, RUN_TTL.as_millis() as i64)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(())
    }
}

/// The run's side: hears arrivals, lets buyers go.
pub struct Scheduler {
    client: redis::Client,
    conn: redis::aio::MultiplexedConnection,
    keys: RunKeys,
    /// Arrivals not let go yet.
    waiting: Vec<Arrival>,
}

impl Scheduler {
    /// Starts run `run` on the Redis at `url`, forgetting anything an
    /// earlier run of that name left.
    pub async fn start(url: &str, run: &str) -> Result<Scheduler, StoreError> {
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
        let client = redis::Client::open(url)?;
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        let keys = RunKeys::of(run);
        let _: () = conn
            .del(&[&keys.arrivals, &keys.open, &keys.patient, &keys.seen])
            .await?;
        Ok(Scheduler {
            client,
            conn,
            keys,
            waiting: Vec::new(),
        })
    }

    /// An arrival already announced, without waiting.
    pub async fn try_next(&mut self) -> Result<Option<Arrival>, StoreError> {
        let entry: Option<String> = self.conn.lpop(&self.keys.arrivals, None).await?;
        Ok(entry.and_then(|entry| self.heard(&entry)))
    }

    /// Where a tool's own requests announce their answers ([`ANSWERED`]),
    /// so that one wait hears both arrivals and answers. On a connection
    /// of its own: the scheduler's may be blocked in its `BLPOP`, and a
    /// push sent behind it would wait for it.
    pub async fn answers(&self) -> Result<Answers, StoreError> {
        Ok(Answers {
            conn: self.client.get_multiplexed_async_connection().await?,
            arrivals: self.keys.arrivals.clone(),
        })
    }

    fn heard(&mut self, entry: &str) -> Option<Arrival> {
        let arrival = Arrival::parse(entry)?;
        if arrival.gate != ANSWERED && !is_note(&arrival.gate) {
            self.waiting.push(arrival.clone());
        }
        Some(arrival)
    }

    /// The next arrival, if one comes within `timeout`.
    pub async fn next(&mut self, timeout: Duration) -> Result<Option<Arrival>, StoreError> {
        let popped: Option<(String, String)> = self
            .conn
            .blpop(&self.keys.arrivals, timeout.as_secs_f64())
            .await?;
        Ok(popped.and_then(|(_, entry)| self.heard(&entry)))
    }

    /// Lets a buyer through every gate until it arrives at `gate`, where
    /// it stays: that arrival; `None` when no arrival came for `timeout`
    /// before it got there (it answered first, or failed). For a run of
    /// one buyer held at one moment (a lab cell's).
    pub async fn run_to(
        &mut self,
        gate: &str,
        timeout: Duration,
    ) -> Result<Option<Arrival>, StoreError> {
        while let Some(arrival) = self.next(timeout).await? {
            if arrival.gate == gate {
                return Ok(Some(arrival));
            }
            if !is_note(&arrival.gate) {
                self.release(&arrival).await?;
            }
        }
        Ok(None)
    }

    /// Lets the buyer of `arrival` go on from its gate.
    pub async fn release(&mut self, arrival: &Arrival) -> Result<(), StoreError> {
        self.waiting.retain(|waiting| waiting != arrival);
        let go = self.keys.go(&arrival.buyer, &arrival.gate);
        let _: () = redis::pipe()
            .rpush(&go, 1)
            .pexpire(&go, RUN_TTL.as_millis() as i64)
            .query_async(&mut self.conn)
            .await?;
        Ok(())
    }

    /// Makes the run's buyers wait at their gates past
    /// [`DEADLINE`](super::DEADLINE) for `for_` from now (a learner
    /// thinking over a step): said again at each step, it lapses `for_`
    /// after the last.
    pub async fn be_patient(&mut self, for_: Duration) -> Result<(), StoreError> {
        let _: () = self
            .conn
            .pset_ex(&self.keys.patient, 1, for_.as_millis() as u64)
            .await?;
        Ok(())
    }

    /// Every buyer of the run as seen so far: the instance it came
    /// through, the stock it read.
    pub async fn seen(
        &mut self,
    ) -> Result<std::collections::BTreeMap<String, super::Seen>, StoreError> {
        super::seen(&mut self.conn, &self.keys).await
    }

    /// The arrivals heard and not let go yet.
    pub fn waiting(&self) -> &[Arrival] {
        &self.waiting
    }

    /// Ends the run: every waiting buyer goes on, and no gate of the run
    /// holds anyone again.
    pub async fn abandon(&mut self) -> Result<(), StoreError> {
        let _: () = redis::pipe()
            .set_ex(&self.keys.open, 1, RUN_TTL.as_secs())
            .del(&self.keys.patient)
            .query_async(&mut self.conn)
            .await?;
        // Arrivals announced before the run was opened and not heard yet
        // wait too; none comes after (the arrival script checks first).
        while self.try_next().await?.is_some() {}
        for arrival in std::mem::take(&mut self.waiting) {
            self.release(&arrival).await?;
        }
        Ok(())
    }
}
