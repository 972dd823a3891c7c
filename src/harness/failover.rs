//! What a failover needs, whoever plays it (the lab's failover cells, a
//! replay's and the explorer's): the master killed and the new one
//! awaited, an instance serving again, and the leader of etcd's members or
//! ZooKeeper's servers.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nix::sys::signal::Signal;

use super::stack::Stack;
use crate::os::signal;
use crate::up::sentinel;
use crate::wire::Said;

/// How long a failover may take before whoever waits for it gives up.
pub const PROMOTION_TIMEOUT: Duration = Duration::from_secs(20);

/// Kills a replicated Redis's master and its replication relay, `pids`
/// (SIGKILL: what the relay held back is gone), and returns once one of
/// `sentinels` names a master other than `master` and it answers as
/// master: the new master's URL, and how long the promotion took from
/// the kill.
pub async fn kill_master(
    (master_pid, relay): (u32, u32),
    sentinels: &[String],
    master: SocketAddr,
) -> anyhow::Result<(String, Duration)> {
    let kill_started = Instant::now();
    signal(master_pid, Signal::SIGKILL);
    signal(relay, Signal::SIGKILL);
    let promoted =
        sentinel::wait_new_master(sentinels, sentinel::MASTER_NAME, master, PROMOTION_TIMEOUT)
            .await?;
    Ok((promoted, kill_started.elapsed()))
}

/// Waits until `instance` (named `name`) reads `sku`'s state again (from
/// the new master: it asks the Sentinels again after losing the old one).
pub async fn serving_again(
    instance: &crate::client::StackClient,
    name: &str,
    sku: &str,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + PROMOTION_TIMEOUT;
    loop {
        match instance.state(sku).await {
            Ok(_) => return Ok(()),
            Err(err) if Instant::now() > deadline => {
                return Err(err.context(format!(
                    "instance {name} did not serve from the new master within {PROMOTION_TIMEOUT:?}"
                )));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// The etcd member that leads now: its name, for people, and pid.
pub async fn etcd_leader(stack: &Stack) -> anyhow::Result<(Said, u32)> {
    let urls: Vec<String> = stack.etcd_members.iter().map(|m| m.url.clone()).collect();
    let index = crate::up::etcd::leader(&urls).await?;
    let member = &stack.etcd_members[index];
    let n = index + 1;
    let name = crate::said!("etcd leader (member {n})", "etcd 领导者(成员 {n})");
    Ok((name, member.pid))
}

/// The ZooKeeper server that leads now: its name, for people, and pid.
pub async fn zookeeper_leader(stack: &Stack) -> anyhow::Result<(Said, u32)> {
    for (index, server) in stack.zookeeper.iter().enumerate() {
        let port = server.port().context("a ZooKeeper server's port")?;
        if crate::up::zookeeper::mode_at(port).await.as_deref() == Some("leader") {
            let n = index + 1;
            let name = crate::said!(
                "ZooKeeper leader (server {n})",
                "ZooKeeper 领导者(服务器 {n})"
            );
            return Ok((name, server.pid));
        }
    }
    bail!("no ZooKeeper server says it leads")
}
