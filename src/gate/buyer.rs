//! A buyer of a scheduled run: the hook its request's locks and section
//! stop at, announcing each gate it reaches and waiting there for its
//! release (noted on the SKU's timeline).

use crate::knobs::Schedule;
use crate::lock::{Held, Hook, Point, Reached};
use crate::store::StoreError;

use super::{arrive, await_release, is_note, waiting_conn};

/// A buyer of a scheduled run: the hook its request's locks and section
/// stop at.
pub struct Gate {
    client: redis::Client,
    schedule: Schedule,
    /// The instance and the SKU, for the timeline's events.
    instance: String,
    sku: String,
}

impl Gate {
    /// The hook of a request of `schedule` for `sku` on `instance`, on the
    /// Redis `client` speaks to.
    pub fn hook(client: redis::Client, schedule: Schedule, instance: &str, sku: &str) -> Hook {
        Hook::new(Gate::new(client, schedule, instance, sku))
    }

    /// The buyer itself, shared with the hook made of it.
    pub fn new(
        client: redis::Client,
        schedule: Schedule,
        instance: &str,
        sku: &str,
    ) -> std::sync::Arc<Gate> {
        std::sync::Arc::new(Gate {
            client,
            schedule,
            instance: instance.to_owned(),
            sku: sku.to_owned(),
        })
    }

    /// A hold or a release on the SKU's timeline.
    async fn seen(&self, conn: &mut redis::aio::MultiplexedConnection, kind: &str, detail: String) {
        let (instance, sku) = (Some(self.instance.as_str()), Some(self.sku.as_str()));
        crate::timeline::event(conn, kind, instance, sku, detail).await;
    }

    async fn wait(&self, point: Point) -> Result<(), StoreError> {
        let mut conn = waiting_conn(&self.client).await?;
        let buyer = &self.schedule.buyer;
        let gate = point.to_string();
        // A wait for a lock and a vote's answer are only noted.
        let arriving = (buyer.as_str(), self.instance.as_str());
        if !arrive(&mut conn, &self.schedule.run, arriving, &gate).await? || is_note(&gate) {
            return Ok(());
        }
        self.seen(&mut conn, "gate_hold", format!("{buyer} waits at {point}"))
            .await;
        let released = await_release(&mut conn, &self.schedule.run, buyer, &gate).await?;
        let how = match released {
            true => "goes on from",
            false => "was let go by no one (deadline) at",
        };
        self.seen(&mut conn, "gate_release", format!("{buyer} {how} {point}"))
            .await;
        if !released {
            tracing::warn!(
                run = self.schedule.run,
                buyer = self.schedule.buyer,
                %point,
                "nobody released the gate within its deadline: going on"
            );
        }
        Ok(())
    }
}

impl Gate {
    /// Notes the stock this buyer's section read, for whoever schedules
    /// the run (step mode shows it in the buyer's lane). A note that
    /// cannot be written is only missing from the picture.
    pub async fn read(&self, stock: i64) {
        let noted = async {
            let mut conn = self.client.get_multiplexed_async_connection().await?;
            let seen = super::RunKeys::of(&self.schedule.run).seen;
            let _: () = redis::pipe()
                .hset(&seen, format!("{} read", self.schedule.buyer), stock)
                .pexpire(&seen, super::RUN_TTL.as_millis() as i64)
                .query_async(&mut conn)
                .await?;
            Ok::<_, StoreError>(())
        };
        if let Err(err) = noted.await {
            tracing::warn!(%err, "a gate could not note the stock read");
        }
    }
}

impl Reached for Gate {
    fn reached(&self, point: Point) -> Held<'_> {
        Box::pin(async move {
            // A gate that cannot reach Redis holds nothing: the request
            // meets the failure in its own next command.
            if let Err(err) = self.wait(point).await {
                tracing::warn!(%err, %point, "a gate could not reach Redis: going on");
            }
        })
    }
}
