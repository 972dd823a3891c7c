//! The nemesis's moves: each kind of fault played against the stack, and
//! a chaos action armed until it struck or its hold passed.

use std::time::Duration;

use anyhow::{Context, bail};
use nix::sys::signal::Signal;
use serde_json::json;

use super::Nemesis;
use crate::os::{children_of, signal};
use crate::soak::faults::{Kind, Planned};
use crate::soak::processes::{Server, frozen, patiently, pick, pids};

impl Nemesis {
    pub(super) async fn play(&self, fault: &Planned) -> anyhow::Result<String> {
        let hold = fault.hold;
        let ms = hold.as_millis() as u64;
        match fault.kind {
            Kind::PauseHolder => {
                self.arm(json!({"action": "pause_holder", "ms": ms}), hold)
                    .await
            }
            Kind::CrashAfterAcquire => {
                self.arm(json!({"action": "crash_after_acquire"}), hold)
                    .await
            }
            Kind::CrashAfterWrite => self.arm(json!({"action": "crash_after_write"}), hold).await,
            Kind::CrashBeforeEnqueue => {
                self.arm(json!({"action": "crash_before_enqueue"}), hold)
                    .await
            }
            Kind::WorkerCrashBeforeAck => {
                self.arm(json!({"action": "worker_crash_before_ack"}), hold)
                    .await
            }
            Kind::Crash => self.arm(json!({"action": "crash"}), hold).await,
            Kind::LockVanishes => {
                let sku = {
                    let skus = self.lock_skus.lock().unwrap_or_else(|p| p.into_inner());
                    if skus.is_empty() {
                        bail!("no lock variant is selling");
                    }
                    skus[fault.pick as usize % skus.len()].clone()
                };
                let client = self.stack.lock().await.client.clone();
                patiently(&client, json!({"action": "lock_vanishes", "sku": sku})).await?;
                Ok(sku)
            }
            Kind::PauseRedis => {
                let client = self.stack.lock().await.client.clone();
                patiently(&client, json!({"action": "pause_redis", "ms": ms})).await?;
                tokio::time::sleep(hold).await;
                Ok("redis".to_owned())
            }
            Kind::RestartRedis => {
                let (client, pid) = {
                    let stack = self.stack.lock().await;
                    (stack.client.clone(), stack.redis_pid)
                };
                patiently(&client, json!({"action": "restart_redis"})).await?;
                self.until(|s| s.redis_pid.is_some() && s.redis_pid != pid)
                    .await?;
                Ok("redis".to_owned())
            }
            Kind::ClockSkew => {
                let (client, name) = {
                    let stack = self.stack.lock().await;
                    let instance = pick(&stack.instances, fault.pick)?;
                    (stack.client.at(&instance.url), instance.name.clone())
                };
                let skew = if fault.pick.is_multiple_of(2) {
                    3_000
                } else {
                    -3_000
                };
                patiently(&client, json!({"action": "clock_skew", "ms": skew})).await?;
                tokio::time::sleep(hold).await;
                // A restart in between already set it back.
                let _ = client
                    .chaos(&json!({"action": "clock_skew", "ms": 0}))
                    .await;
                Ok(format!("instance {name} {skew:+} ms"))
            }
            Kind::KillInstance => {
                let _alone = self.instances.lock().await;
                let (name, pid) = {
                    let stack = self.stack.lock().await;
                    let instance = pick(&stack.instances, fault.pick)?;
                    (instance.name.clone(), instance.pid)
                };
                signal(pid, Signal::SIGKILL);
                self.until(|s| s.instances.iter().any(|i| i.name == name && i.pid != pid))
                    .await?;
                Ok(format!("instance {name}"))
            }
            Kind::StopInstance => {
                let _alone = self.instances.lock().await;
                let (name, pid) = {
                    let stack = self.stack.lock().await;
                    let instance = pick(&stack.instances, fault.pick)?;
                    (instance.name.clone(), instance.pid)
                };
                frozen(&[pid], hold).await?;
                Ok(format!("instance {name}"))
            }
            Kind::Partition => {
                let (index, pid) = {
                    let stack = self.stack.lock().await;
                    let index = fault.pick as usize % stack.relays.len().max(1);
                    (index, pick(&stack.relays, fault.pick)?.pid)
                };
                frozen(&[pid], hold).await?;
                Ok(format!(
                    "instance {} from redis",
                    char::from(b'a' + index as u8)
                ))
            }
            Kind::KillRedlockNode => self.kill_node(Server::Redlock, fault).await,
            Kind::KillEtcd => self.kill_node(Server::Etcd, fault).await,
            Kind::KillZookeeper => self.kill_node(Server::Zookeeper, fault).await,
            Kind::StopRedlockNode | Kind::StopEtcd | Kind::StopZookeeper => {
                let server = match fault.kind {
                    Kind::StopRedlockNode => Server::Redlock,
                    Kind::StopEtcd => Server::Etcd,
                    _ => Server::Zookeeper,
                };
                let _alone = self.servers[server as usize].lock().await;
                let (index, pid) = {
                    let stack = self.stack.lock().await;
                    let nodes = server.nodes(&stack);
                    (
                        fault.pick as usize % nodes.len().max(1),
                        pick(nodes, fault.pick)?.pid,
                    )
                };
                frozen(&[pid], hold).await?;
                Ok(format!("{} {}", server.name(), index + 1))
            }
            Kind::KillPostgres => {
                let _alone = self.postgres.lock().await;
                let pid = self.postgres_pid().await?;
                crate::os::kill_with_children(pid);
                self.until(|s| s.postgres.as_ref().is_some_and(|p| p.pid != pid))
                    .await?;
                Ok("postgres".to_owned())
            }
            Kind::StopPostgres => {
                let _alone = self.postgres.lock().await;
                let pid = self.postgres_pid().await?;
                let mut all = vec![pid];
                all.extend(children_of(pid));
                frozen(&all, hold).await?;
                Ok("postgres".to_owned())
            }
        }
    }

    /// Arms (or sends) a chaos action, waits for a crash it causes to be
    /// followed by the restart, and disarms what did not strike within
    /// `hold` plus a few seconds.
    async fn arm(&self, action: serde_json::Value, hold: Duration) -> anyhow::Result<String> {
        let (client, before) = {
            let stack = self.stack.lock().await;
            (stack.client.clone(), pids(&stack))
        };
        // The arming call can lose its answer to the crash it armed (its
        // instance struck first): whether an instance restarted says.
        let armed = patiently(&client, action).await;
        let restarted = self
            .until_within(hold + Duration::from_secs(3), |s| pids(s) != before)
            .await;
        let mut conn = self.store.conn().await.context("redis, to disarm")?;
        crate::chaos::disarm(&mut conn).await?;
        if !restarted {
            // A freeze ends by itself; a crash that struck shows its restart.
            return armed.map(|_| "armed".to_owned());
        }
        // A crash struck: wait for the whole stack to be back.
        self.until(|s| s.instances.iter().all(|i| crate::os::is_alive(i.pid)))
            .await?;
        Ok("an instance crashed".to_owned())
    }

    async fn postgres_pid(&self) -> anyhow::Result<u32> {
        let stack = self.stack.lock().await;
        stack
            .postgres
            .as_ref()
            .map(|p| p.pid)
            .context("no PostgreSQL in this stack")
    }
}
