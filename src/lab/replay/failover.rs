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

use super::live::Live;
use crate::lab::stack::Stack;
use crate::store::Store;
use crate::up::redis::RedisServer;
use crate::up::relay;

/// How long a new replica may take to sync.
const SYNC: Duration = Duration::from_secs(20);

/// A failover replay's lease at least: the model's time stands still
/// while the real failover takes seconds, so no live lease may run out
/// meanwhile.
pub(super) const LEASE_MS: u64 = 10_000;

/// The replicated Redis of a failover replay's stack.
pub(super) struct Failing {
    relay: u32,
    master_pid: u32,
    master: SocketAddr,
    sentinels: Vec<String>,
    /// The new master's replica, once the replay started one.
    replica: Option<RedisServer>,
}

impl Failing {
    /// What `stack` (from [`super::start_failover`]) offers to fail over.
    pub(super) fn of(stack: &Stack, redis_url: &str) -> anyhow::Result<Failing> {
        let relay = stack.relay.as_ref().context(
            "the stack has no replica to fail over to: replay a failover on a stack of its own",
        )?;
        Ok(Failing {
            relay: relay.pid,
            master_pid: stack
                .redis_pid
                .context("the stack announced no Redis pid")?,
            master: redis_url
                .trim_start_matches("redis://")
                .parse()
                .context("the master's address")?,
            sentinels: stack.sentinel_addrs(),
            replica: None,
        })
    }
}

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
            crate::lab::failover::kill_master(pids, &failing.sentinels, failing.master).await?;
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
            crate::lab::failover::serving_again(&client, &instance.name, &self.sku).await?;
        }
        Ok(said)
    }
}
