//! The nemesis: plays the schedule's faults against the stack, each in its
//! own task (so that faults overlap when the schedule says), and records
//! when each struck and when it healed. `up` restarts the instances, its
//! Redis and its PostgreSQL; the servers `up` does not restart (Redlock's
//! nodes, etcd's members, ZooKeeper) the nemesis starts again itself, with
//! the command line, directory and environment they had.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nix::sys::signal::Signal;
use serde_json::json;
use tokio::process::Child;
use tokio::sync::Mutex;

use super::buyers::Shared;
use super::faults::{Kind, Planned};
use super::processes::{RESTART_WITHIN, Respawn, Server, frozen, listening, patiently, pick, pids};
use crate::harness::stack::Stack;
use crate::os::{children_of, signal};
use crate::store::Store;
use crate::wire::SoakFault;

/// What the nemesis shares with its fault tasks.
pub(super) struct Nemesis {
    /// The load's: how many faults play, when the last healed.
    shared: Arc<Shared>,
    pub(super) stack: Arc<Mutex<Stack>>,
    /// The stack's own Redis (to disarm a fault that never struck).
    pub(super) store: Store,
    /// The SKUs each variant sells now (a lock deleted hits one of them).
    pub(super) lock_skus: Arc<StdMutex<Vec<String>>>,
    /// Servers started again by the nemesis: killed when it ends.
    respawned: StdMutex<Vec<Child>>,
    respawned_redis: StdMutex<Vec<crate::up::redis::RedisServer>>,
    pub(super) started: Instant,
    pub(super) log: StdMutex<Vec<SoakFault>>,
    /// When each fault still playing started, seconds from the start.
    active: StdMutex<Vec<f64>>,
    /// One fault at a time on each kind of server `up` does not restart: a
    /// stop drawn while a kill's restart is under way would read the dead
    /// process's pid (and fail: never stopped).
    servers: [Mutex<()>; 3],
}

impl Nemesis {
    pub(super) fn new(
        shared: Arc<Shared>,
        stack: Arc<Mutex<Stack>>,
        store: Store,
        lock_skus: Arc<StdMutex<Vec<String>>>,
    ) -> Self {
        Nemesis {
            started: shared.started,
            shared,
            stack,
            store,
            lock_skus,
            respawned: StdMutex::new(Vec::new()),
            respawned_redis: StdMutex::new(Vec::new()),
            log: StdMutex::new(Vec::new()),
            active: StdMutex::new(Vec::new()),
            servers: Default::default(),
        }
    }

    /// Whether the stack has something for `kind` to hit.
    pub(super) async fn can(&self, kind: Kind) -> bool {
        let stack = self.stack.lock().await;
        match kind {
            Kind::KillRedlockNode | Kind::StopRedlockNode => !stack.redlock_nodes.is_empty(),
            Kind::KillEtcd | Kind::StopEtcd => !stack.etcd_members.is_empty(),
            Kind::KillZookeeper | Kind::StopZookeeper => !stack.zookeeper.is_empty(),
            Kind::KillPostgres | Kind::StopPostgres => stack.postgres.is_some(),
            Kind::Partition => !stack.relays.is_empty(),
            Kind::PauseRedis | Kind::RestartRedis => stack.redis_pid.is_some(),
            _ => !stack.instances.is_empty(),
        }
    }

    /// Plays one fault and records it.
    pub(super) async fn strike(self: Arc<Self>, fault: Planned) {
        let at = self.started.elapsed();
        let at_s = at.as_secs_f64();
        self.active
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(at_s);
        let _playing = Playing::start(&self.shared);
        let (target, error) = match self.play(&fault).await {
            Ok(target) => (target, String::new()),
            Err(err) => (String::new(), format!("{err:#}")),
        };
        let healed = self.started.elapsed();
        if !error.is_empty() {
            tracing::warn!(kind = fault.kind.name(), %error, "a fault did not strike");
        }
        self.log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(SoakFault {
                kind: fault.kind.name().to_owned(),
                target,
                at_s,
                healed_s: healed.as_secs_f64(),
                error,
            });
        let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = active.iter().position(|&s| s == at_s) {
            active.swap_remove(i);
        }
        // `_playing` ends here: the fault has healed.
    }

    /// The faults healed so far, and when the earliest still playing started.
    pub(super) fn known(&self) -> (Vec<SoakFault>, Option<f64>) {
        let active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner()).clone();
        (log, active.iter().copied().reduce(f64::min))
    }

    /// Kills the servers it started again, once the run is over.
    pub(super) async fn stop(&self) {
        let children: Vec<Child> =
            std::mem::take(&mut *self.respawned.lock().unwrap_or_else(|p| p.into_inner()));
        for mut child in children {
            if let Some(pid) = child.id() {
                signal(pid, Signal::SIGCONT);
            }
            let _ = child.kill().await;
        }
        let nodes: Vec<_> = std::mem::take(
            &mut *self
                .respawned_redis
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        for mut node in nodes {
            if let Some(pid) = node.pid() {
                signal(pid, Signal::SIGCONT);
            }
            node.stop().await;
        }
    }

    async fn play(&self, fault: &Planned) -> anyhow::Result<String> {
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
                let pid = self.postgres_pid().await?;
                crate::os::kill_with_children(pid);
                self.until(|s| s.postgres.as_ref().is_some_and(|p| p.pid != pid))
                    .await?;
                Ok("postgres".to_owned())
            }
            Kind::StopPostgres => {
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

    /// Kills a server `up` does not restart, and starts it again after
    /// the fault's hold, as it was.
    async fn kill_node(&self, server: Server, fault: &Planned) -> anyhow::Result<String> {
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
    async fn until(&self, ready: impl Fn(&Stack) -> bool) -> anyhow::Result<()> {
        if self.until_within(RESTART_WITHIN, ready).await {
            Ok(())
        } else {
            bail!(
                "the stack was not back {} s after the fault",
                RESTART_WITHIN.as_secs()
            )
        }
    }

    async fn until_within(&self, within: Duration, ready: impl Fn(&Stack) -> bool) -> bool {
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

/// A fault counted as playing while this lives, however its task ends;
/// when it ends the fault has healed (the load's quiet stretch begins).
struct Playing<'a>(&'a Shared);

impl<'a> Playing<'a> {
    fn start(shared: &'a Shared) -> Self {
        shared.faults_playing.fetch_add(1, Ordering::Relaxed);
        Playing(shared)
    }
}

impl Drop for Playing<'_> {
    fn drop(&mut self) {
        self.0.healed_ms.store(self.0.ms(), Ordering::Relaxed);
        self.0.faults_playing.fetch_sub(1, Ordering::Relaxed);
    }
}
