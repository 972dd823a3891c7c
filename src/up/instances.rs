//! The instances behind nginx: each one this same binary run as `serve`,
//! started in turn (each ready before the next), and kept running by its
//! own supervisor until `up` stops. An instance restarted while another
//! process holds its old port moves to a free one, and `up` points nginx
//! there before the instance is announced again.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use tokio::process::{Child, ChildStdin};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;

use super::process;
use crate::variants::Variant;

/// How long an instance may take to print its listening line.
const INSTANCE_READY: Duration = Duration::from_secs(15);

/// The instances' names: a, b, c, ...
fn instance_name(index: u16) -> String {
    char::from(b'a' + (index % 26) as u8).to_string()
}

/// What every instance of the stack shares.
pub(super) struct Shared {
    pub(super) redis_url: String,
    /// `--store-relays`: instance n reaches Redis through the nth.
    pub(super) relay_urls: Vec<String>,
    pub(super) redis_cluster: Vec<String>,
    /// `--replica`: the Sentinels the instances find the master through.
    pub(super) sentinels: Vec<String>,
    pub(super) lock_stores: crate::lock::LockStoresConfig,
    /// The orders' PostgreSQL (`None`: orders off).
    pub(super) postgres_url: Option<String>,
    pub(super) request_ttl: Duration,
    pub(super) sold_out_mark_ttl: Duration,
    pub(super) order_timing: crate::orders::Timing,
    pub(super) admin_token: String,
    pub(super) default_variant: Variant,
    pub(super) public_url: String,
    pub(super) chaos: bool,
    /// `up` started (and restarts) the Redis: chaos may pause and restart it.
    pub(super) owns_redis: bool,
    /// `up --bench-bare`: the instances serve the bench's bare baseline.
    pub(super) bench_bare: bool,
    /// `up --batch-max`: lua-batch's buyers per call.
    pub(super) batch_max: usize,
    pub(super) gate_redis: Option<String>,
}

/// The running instances, each under its own supervisor.
pub(super) struct Instances {
    supervisors: JoinSet<()>,
    /// Turned true to stop every supervisor and its instance.
    stop: watch::Sender<bool>,
    /// Their addresses, in order: nginx's upstreams.
    pub(super) addrs: Vec<SocketAddr>,
    /// Instances restarted on a new port, for nginx to follow.
    moves: mpsc::UnboundedReceiver<Moved>,
}

/// An instance restarted on a new address because another process took
/// its old port; its supervisor announces it once `done` is answered (or
/// dropped), after nginx has been pointed there.
pub(super) struct Moved {
    index: usize,
    addr: SocketAddr,
    done: oneshot::Sender<()>,
}

impl Instances {
    /// Starts `count` instances on free loopback ports, one at a time, each
    /// ready before the next; instance n runs its clock `clock_skew_ms[n]`
    /// ahead (0 past the end of the list).
    pub(super) async fn start(
        count: u16,
        shared: &Shared,
        clock_skew_ms: &[i64],
    ) -> anyhow::Result<Instances> {
        let binary = std::env::current_exe().context("cannot find this program's own path")?;
        let (stop, stopped) = watch::channel(false);
        let mut supervisors = JoinSet::new();
        let mut addrs = Vec::new();
        let (moved, moves) = mpsc::unbounded_channel();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let worker_threads = (cores / usize::from(count.max(1))).max(1);
        for index in 0..count {
            let spec = InstanceSpec {
                index: usize::from(index),
                name: instance_name(index),
                addr: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), crate::os::free_port()?),
                redis_url: (shared.relay_urls.get(usize::from(index)))
                    .unwrap_or(&shared.redis_url)
                    .clone(),
                redis_cluster: shared.redis_cluster.clone(),
                sentinels: shared.sentinels.clone(),
                lock_stores: shared.lock_stores.clone(),
                postgres_url: shared.postgres_url.clone(),
                request_ttl: shared.request_ttl,
                sold_out_mark_ttl: shared.sold_out_mark_ttl,
                order_timing: shared.order_timing,
                admin_token: shared.admin_token.clone(),
                default_variant: shared.default_variant,
                public_url: shared.public_url.clone(),
                chaos: shared.chaos,
                owns_redis: shared.owns_redis,
                bench_bare: shared.bench_bare,
                batch_max: shared.batch_max,
                gate_redis: shared.gate_redis.clone(),
                clock_skew_ms: clock_skew_ms.get(usize::from(index)).copied().unwrap_or(0),
                binary: binary.clone(),
                worker_threads,
            };
            addrs.push(spec.addr);
            let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
            supervisors.spawn(supervise(spec, stopped.clone(), ready_tx, moved.clone()));
            ready_rx
                .await
                .context("an instance's supervisor ended before the instance was ready")??;
        }
        Ok(Instances {
            supervisors,
            stop,
            addrs,
            moves,
        })
    }

    /// The next instance that moved to a new address, with `addrs`
    /// already updated; answer its `done` once nginx follows.
    pub(super) async fn moved(&mut self) -> oneshot::Sender<()> {
        loop {
            // The supervisors hold senders until they stop.
            let Some(moved) = self.moves.recv().await else {
                return std::future::pending().await;
            };
            if let Some(addr) = self.addrs.get_mut(moved.index) {
                *addr = moved.addr;
                return moved.done;
            }
        }
    }

    /// Stops every instance and waits for their supervisors.
    pub(super) async fn stop(mut self) {
        let _ = self.stop.send(true);
        while self.supervisors.join_next().await.is_some() {}
    }
}

/// How to start one instance.
struct InstanceSpec {
    /// Its place among the instances (and nginx's upstreams).
    index: usize,
    name: String,
    addr: SocketAddr,
    redis_url: String,
    redis_cluster: Vec<String>,
    sentinels: Vec<String>,
    lock_stores: crate::lock::LockStoresConfig,
    postgres_url: Option<String>,
    request_ttl: Duration,
    sold_out_mark_ttl: Duration,
    order_timing: crate::orders::Timing,
    admin_token: String,
    default_variant: Variant,
    public_url: String,
    chaos: bool,
    /// `up` started (and restarts) the Redis: chaos may pause and restart it.
    owns_redis: bool,
    bench_bare: bool,
    batch_max: usize,
    gate_redis: Option<String>,
    clock_skew_ms: i64,
    binary: PathBuf,
    /// The machine's cores shared out among the instances (one at least).
    worker_threads: usize,
}

impl InstanceSpec {
    fn spawn(&self) -> std::io::Result<Child> {
        let mut command = process::command(&self.binary);
        command
            .arg("serve")
            .arg("--listen")
            .arg(self.addr.to_string())
            // Not on the command line (`ps` shows those to every user):
            // a URL may carry a password.
            .env("STOCKLOCK_REDIS_URL", &self.redis_url)
            .arg("--instance")
            .arg(&self.name)
            .arg("--default-variant")
            .arg(self.default_variant.name())
            .arg("--exit-with-stdin")
            .arg(format!("--worker-threads={}", self.worker_threads))
            .arg("--public-url")
            .arg(&self.public_url);
        if !self.redis_cluster.is_empty() {
            command.arg(format!("--redis-cluster={}", self.redis_cluster.join(",")));
        }
        if !self.sentinels.is_empty() {
            command.arg(format!("--sentinel={}", self.sentinels.join(",")));
        }
        command.args(self.lock_stores.to_args());
        // Through the environment, not the command line: a user's URL may
        // carry a password. Removed when off: up's own may be set.
        match &self.postgres_url {
            Some(url) => command.env("STOCKLOCK_POSTGRES_URL", url),
            None => command.env_remove("STOCKLOCK_POSTGRES_URL"),
        };
        command.arg(format!("--request-ttl={}ms", self.request_ttl.as_millis()));
        command.args(self.order_timing.to_args());
        command.arg(format!(
            "--sold-out-mark-ttl={}ms",
            self.sold_out_mark_ttl.as_millis()
        ));
        if self.bench_bare {
            command.arg("--bench-bare");
        }
        command.arg(format!("--batch-max={}", self.batch_max));
        if self.chaos {
            command
                .arg("--chaos")
                .arg(format!("--clock-skew-ms={}", self.clock_skew_ms));
            if self.owns_redis {
                command.arg("--chaos-redis");
            }
        }
        match &self.gate_redis {
            Some(url) if self.chaos => command.env("STOCKLOCK_GATE_REDIS", url),
            _ => command.env_remove("STOCKLOCK_GATE_REDIS"),
        };
        command
            .env("STOCKLOCK_ADMIN_TOKEN", &self.admin_token)
            // We keep the write end; if we die, the instance sees EOF and stops.
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
    }
}

/// Keeps one instance running: starts it, reports when it is first ready,
/// and restarts it whenever it dies, until `stop` turns true. A restart
/// finding its port held by another process moves to a free one.
async fn supervise(
    mut spec: InstanceSpec,
    mut stop: watch::Receiver<bool>,
    ready: tokio::sync::oneshot::Sender<anyhow::Result<()>>,
    moved: mpsc::UnboundedSender<Moved>,
) {
    let mut ready = Some(ready);
    let mut backoff = Duration::from_millis(100);
    // Moved to a port nginx does not know yet (kept across failed starts).
    let mut moved_unseen = false;
    loop {
        let started = tokio::time::Instant::now();
        // nginx still sends this port's share of the traffic, admin
        // tokens included: it must reach an instance of ours.
        if ready.is_none() && crate::os::port_taken(spec.addr) {
            match crate::os::free_port() {
                Ok(port) => {
                    moved_unseen = true;
                    tracing::warn!(instance = %spec.name, "port {} is taken by another process; moving to {port}", spec.addr.port());
                    spec.addr.set_port(port);
                }
                Err(err) => tracing::error!(instance = %spec.name, "no free port: {err}"),
            }
        }
        let child = start_instance(&spec).await;
        let (mut child, _stdin) = match child {
            Ok(child) => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Ok(()));
                }
                child
            }
            Err(err) => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Err(err));
                    return;
                }
                tracing::error!(instance = %spec.name, "restart failed: {err:#}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        if std::mem::take(&mut moved_unseen) {
            let (done, followed) = oneshot::channel();
            let _ = moved.send(Moved {
                index: spec.index,
                addr: spec.addr,
                done,
            });
            // Dropped unanswered when `up` stops first.
            tokio::select! {
                _ = followed => {},
                _ = stop.wait_for(|stopped| *stopped) => {},
            }
        }
        say!(
            "instance {}: pid {} http://{}",
            spec.name,
            child.id().unwrap_or(0),
            spec.addr
        );
        let stopped = tokio::select! {
            status = child.wait() => Err(status),
            _ = stop.wait_for(|stopped| *stopped) => Ok(()),
        };
        match stopped {
            Ok(()) => {
                process::stop(&mut child, Duration::from_secs(5)).await;
                return;
            }
            Err(status) => {
                if *stop.borrow() {
                    return;
                }
                tracing::warn!(instance = %spec.name, ?status, "instance died; restarting");
                // A process that dies right after starting would spin: back off.
                backoff = if started.elapsed() > Duration::from_secs(5) {
                    Duration::from_millis(100)
                } else {
                    (backoff * 2).min(Duration::from_secs(5))
                };
                tokio::time::sleep(backoff).await;
            }
        }
    }
}

/// Starts one instance and waits until it says it is ready (listening, and
/// subscribed to lock releases, so no early waiter misses a wake-up). The
/// instance stops when the returned stdin handle is dropped (`Child::wait`
/// would drop it if it stayed inside the child).
async fn start_instance(spec: &InstanceSpec) -> anyhow::Result<(Child, ChildStdin)> {
    let mut child = spec
        .spawn()
        .with_context(|| format!("cannot run {}", spec.binary.display()))?;
    let stdin = child.stdin.take().context("instance stdin")?;
    let stdout = child.stdout.take().context("instance stdout")?;
    let (output, ready) = process::watch_output(stdout, Some("is ready"), None);
    let what = format!("instance {}", spec.name);
    process::wait_ready(&mut child, ready, &output, &what, INSTANCE_READY).await?;
    Ok((child, stdin))
}
