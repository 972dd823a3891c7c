//! The nemesis: plays the schedule's faults against the stack, each in its
//! own task (so that faults overlap when the schedule says), and records
//! when each struck and when it healed. `up` restarts the instances, its
//! Redis and its PostgreSQL; the servers `up` does not restart (Redlock's
//! nodes, etcd's members, ZooKeeper) the nemesis starts again itself, with
//! the command line, directory and environment they had.
mod play;
mod servers;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Instant;

use nix::sys::signal::Signal;
use tokio::process::Child;
use tokio::sync::Mutex;

use super::buyers::Shared;
use super::faults::{Kind, Planned};
use crate::harness::stack::Stack;
use crate::os::signal;
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
    /// The same for the servers `up` restarts whose process a fault reads
    /// (PostgreSQL; an instance killed or stopped): a stop drawn for the
    /// moment of a kill waits for the restart and freezes the new process.
    postgres: Mutex<()>,
    instances: Mutex<()>,
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
            postgres: Mutex::new(()),
            instances: Mutex::new(()),
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
