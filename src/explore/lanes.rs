//! A session's buyers as a learner sees them (step mode's lanes): where
//! each waits, or what it was answered.

use std::time::Duration;

use super::Session;
use super::run::{Buyer, name};

/// One buyer now.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Lane {
    pub buyer: String,
    /// `waiting` (at `gate`), `on_its_way`, `waits_for_lock`, `frozen`
    /// (at `gate`), `crashed`, `answered`.
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
    /// Its answer's status and reason (`sold`, `sold_out`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The instance its request went through, once it reached a gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// The stock its section read, once it read it (a lock's section).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<i64>,
    /// The unit its answer sold it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<i64>,
}

impl Session<'_> {
    /// Every buyer, in order.
    pub fn lanes(&self) -> Vec<Lane> {
        let run = &self.run;
        (0..run.count)
            .map(|n| {
                let lane = |state: &str, gate: Option<&str>| Lane {
                    buyer: name(n),
                    state: state.to_owned(),
                    gate: gate.map(str::to_owned),
                    status: None,
                    reason: None,
                    instance: None,
                    read: None,
                    unit: None,
                };
                match run.buyers.get(&n) {
                    Some(Buyer::Waiting(arrival, _)) if run.frozen.contains(&n) => {
                        lane("frozen", Some(&arrival.gate))
                    }
                    Some(Buyer::Waiting(arrival, _)) => lane("waiting", Some(&arrival.gate)),
                    Some(Buyer::Sent(_)) if run.blocked.contains(&n) => {
                        lane("waits_for_lock", None)
                    }
                    Some(Buyer::Sent(_)) | None => lane("on_its_way", None),
                    Some(Buyer::Crashed(_)) => lane("crashed", None),
                    Some(Buyer::Done(answer)) => Lane {
                        status: Some(answer.status),
                        reason: answer.reason().map(str::to_owned),
                        unit: answer.unit(),
                        ..lane("answered", None)
                    },
                }
            })
            .collect()
    }

    /// Every buyer, in order, with the instance it went through and the
    /// stock it read, as the gates saw them.
    pub async fn lanes_seen(&mut self) -> Vec<Lane> {
        let mut lanes = self.lanes();
        // A lane without what was seen still says where its buyer is.
        let seen = self.run.scheduler.seen().await.unwrap_or_default();
        for lane in &mut lanes {
            if let Some(seen) = seen.get(&lane.buyer) {
                lane.instance = seen.instance.clone();
                lane.read = seen.read;
            }
        }
        lanes
    }

    /// The SKU the session sells.
    pub fn sku(&self) -> &str {
        &self.setup.sku
    }

    /// The SKU as the stores hold it now.
    pub async fn state(&self) -> anyhow::Result<crate::wire::StateSnapshot> {
        self.run.stack.client.state(&self.setup.sku).await
    }

    /// The last fencing token the SKU's lock issued, if it issued one.
    pub async fn fence(&self) -> Option<i64> {
        let mut conn = self.run.store.conn().await.ok()?;
        redis::cmd("GET")
            .arg(&self.run.keys.fence)
            .query_async::<Option<i64>>(&mut conn)
            .await
            .ok()
            .flatten()
    }

    /// Lets `time` pass while nobody chooses: the buyers live on (a
    /// watchdog's renewal goes on at once, as between the explorer's
    /// steps).
    pub async fn wait(&mut self, time: Duration) -> anyhow::Result<()> {
        self.run.pass(time).await
    }

    /// Keeps the buyers waiting at their gates past the gates' deadline
    /// for `for_` from now.
    pub async fn be_patient(&mut self, for_: Duration) -> anyhow::Result<()> {
        Ok(self.run.scheduler.be_patient(for_).await?)
    }
}
