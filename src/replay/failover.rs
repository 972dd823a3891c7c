//! A replay's failover of the lock's Redis, on `up --replica` (a replica
//! replicating through a relay, three Sentinels) with the gates on a
//! Redis apart: the model's "replication stops" freezes the relay once the
//! replica has everything the master had so far; "the master dies" kills
//! the master and the relay, waits for Sentinel's promotion and for every
//! instance to serve from the new master (a buyer held at a gate meets it
//! in its next command), and, as the model's old master comes back as the
//! new one's replica, starts a replica of the new master when the cell's
//! buyers `WAIT` for one.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, bail};

use super::failing::Failing;
use super::live::Live;
use crate::store::Store;
use crate::up::redis::RedisServer;
use crate::up::relay;

/// How long a new replica may take to sync.
const SYNC: Duration = Duration::from_secs(20);

impl Live<'_> {
    fn failing(&mut self) -> anyhow::Result<&mut Failing> {
        self.failing
            .as_mut()
            .context("the model fails the Redis over and the stack cannot")
    }

    /// The model's replica stops hearing from the master: what the master
    /// has now reaches the replica (`WAIT 1`), then the relay is frozen.
    pub(super) async fn hold_replication(&mut self) -> anyhow::Result<String> {
        let mut conn = self.store.conn().await?;
        let acked = crate::store::wait_replicas(&mut conn, 1, Duration::from_secs(5)).await?;
        if acked < 1 {
            bail!("the replica did not catch up with the master within 5 s");
        }
        relay::hold(self.failing()?.relay).await?;
        Ok("the replica has all the master had; the relay between them is frozen".to_owned())
    }

    /// The master dies and Sentinel promotes the replica.
    pub(super) async fn fail_over(&mut self) -> anyhow::Result<String> {
        let wait_replicas = self.sale.bounds.wait_replicas;
        let failing = self.failing()?;
        let pids = (failing.master_pid, failing.relay);
        let (promoted, took) =
            crate::harness::failover::kill_master(pids, &failing.sentinels, failing.master).await?;
        let mut said = format!(
            "master {} killed; Sentinel promoted {promoted} after {:.1} s",
            failing.master,
            took.as_secs_f64()
        );
        if wait_replicas {
            let addr: SocketAddr = promoted.trim_start_matches("redis://").parse()?;
            let replica = RedisServer::start_replica(addr).await?;
            crate::up::redis::wait_replicating(&replica.url(), &promoted, SYNC).await?;
            said.push_str(&format!("; a replica of it synced at {}", replica.url()));
            failing.replica = Some(replica);
        }
        self.store = Store::open(&promoted)?;
        for instance in &self.stack.instances {
            let client = self.stack.client.at(&instance.url);
            crate::harness::failover::serving_again(&client, &instance.name, &self.sku).await?;
        }
        Ok(said)
    }
}
