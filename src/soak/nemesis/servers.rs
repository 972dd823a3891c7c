//! The servers `up` does not restart (Redlock's nodes, etcd's members,
//! ZooKeeper), killed and started again by the nemesis, and its waits for
//! the stack to be back.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nix::sys::signal::Signal;

use super::Nemesis;
use crate::harness::stack::Stack;
use crate::os::signal;
use crate::soak::faults::Planned;
use crate::soak::processes::{RESTART_WITHIN, Respawn, Server, listening, pick};

impl Nemesis {
    /// the fault's hold, as it was.
    pub(super) async fn kill_node(
        &self,
        server: Server,
        fault: &Planned,
    ) -> anyhow::Result<String> {
        let _alone = self.servers[server as usize].lock().await;
        let (index, node) = {
            let stack = self.stack.lock().await;
            let nodes = server.nodes(&stack);
            (
                fault.pick as usize % nodes.len().max(1),
                pick(nodes, fault.pick)?.clone(),
            )
        };
        let port = node.port().context("the node's port")?;
        // redis-server rewrites its command line (its title): a Redlock
        // node is started again as `up` started it, empty.
        let again = match server {
            Server::Redlock => None,
            _ => Some(Respawn::of(node.pid)?),
        };
        signal(node.pid, Signal::SIGKILL);
        tokio::time::sleep(fault.hold).await;
        let new_pid = match again {
            None => {
                let redis = crate::up::redis::RedisServer::start(Some(port)).await?;
                let pid = redis.pid().unwrap_or(0);
                self.respawned_redis
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(redis);
                pid
            }
            Some(again) => {
                let child = again.spawn()?;
                let pid = child.id().unwrap_or(0);
                self.respawned
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(child);
                listening(port).await?;
                pid
            }
        };
        let mut stack = self.stack.lock().await;
        if let Some(node) = server.nodes_mut(&mut stack).get_mut(index) {
            node.pid = new_pid;
        }
        Ok(format!("{} {}", server.name(), index + 1))
    }

    /// Waits (up to [`RESTART_WITHIN`]) until `ready` holds of the stack,
    /// as `up`'s lines tell it.
    pub(super) async fn until(&self, ready: impl Fn(&Stack) -> bool) -> anyhow::Result<()> {
        if self.until_within(RESTART_WITHIN, ready).await {
            Ok(())
        } else {
            bail!(
                "the stack was not back {} s after the fault",
                RESTART_WITHIN.as_secs()
            )
        }
    }

    pub(super) async fn until_within(
        &self,
        within: Duration,
        ready: impl Fn(&Stack) -> bool,
    ) -> bool {
        let deadline = Instant::now() + within;
        loop {
            {
                let mut stack = self.stack.lock().await;
                // Takes in the lines `up` printed meanwhile ("\u{1}" starts none).
                let _ = stack.next_line("\u{1}", Duration::from_millis(5)).await;
                if ready(&stack) {
                    return true;
                }
            }
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
