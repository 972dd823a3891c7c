//! A redis-server child on loopback, in its own temporary directory, with
//! persistence off; or, asked to persist, with an append-only file fsynced
//! before every reply, in a directory that outlives the process (so a
//! restart on the same directory keeps every acknowledged write). Used by
//! `stocklock up` and by the test suite.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use tempfile::TempDir;
use tokio::process::Command;

use super::process::{self, Running};
use crate::os::free_port;

/// DEBUG off, CONFIG renamed to nothing (gone): see
/// [`RedisServer::start_locked_down`].
const LOCKED_DOWN: &[&str] = &[
    "--enable-debug-command",
    "no",
    "--rename-command",
    "CONFIG",
    "",
];

/// How long redis-server may take to say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// The memory a Redis of ours may use (`maxmemory`, with `noeviction`).
pub const MAXMEMORY: &str = "1gb";

/// A running redis-server. Stopped (SIGTERM, then SIGKILL) by [`stop`],
/// killed by pid when dropped.
///
/// [`stop`]: super::process::Running::stop
pub struct RedisServer {
    process: Running,
    port: u16,
    /// Where it keeps its files: its own temporary directory (removed with
    /// it), or the caller's directory of an append-only file.
    dir: DataDir,
}

enum DataDir {
    Temporary(TempDir),
    Persistent(PathBuf),
}

impl DataDir {
    fn path(&self) -> &Path {
        match self {
            DataDir::Temporary(dir) => dir.path(),
            DataDir::Persistent(dir) => dir,
        }
    }
}

process::runs_as_process!(RedisServer);

impl RedisServer {
    /// Starts redis-server on `port`, or on a free port when `None` (trying
    /// again with another if the one picked was taken meanwhile).
    pub async fn start(port: Option<u16>) -> anyhow::Result<Self> {
        Self::start_with(port, &[]).await
    }

    /// Starts redis-server with an append-only file in `dir`, fsynced
    /// before every reply (`appendfsync always`): a write Redis answered
    /// survives a kill -9, and a server started again on the same `dir`
    /// loads it. On `port`, or a free port when `None`.
    pub async fn start_persistent(port: Option<u16>, dir: &Path) -> anyhow::Result<Self> {
        Self::persistent(port, dir, &[]).await
    }

    /// `up`'s Redis without chaos mode: as [`start`] (or [`start_persistent`]
    /// in `persist`), with DEBUG and CONFIG taken from its clients (a
    /// student could pause it with DEBUG SLEEP, or switch anything off
    /// with CONFIG). Chaos mode's "pause Redis" needs DEBUG: it keeps both.
    ///
    /// [`start`]: Self::start
    /// [`start_persistent`]: Self::start_persistent
    pub async fn start_locked_down(
        port: Option<u16>,
        persist: Option<&Path>,
    ) -> anyhow::Result<Self> {
        match persist {
            Some(dir) => Self::persistent(port, dir, LOCKED_DOWN).await,
            None => Self::start_with(port, LOCKED_DOWN).await,
        }
    }

    async fn persistent(port: Option<u16>, dir: &Path, extra: &[&str]) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let binary = process::require_program("redis-server", "redis-server")?;
        let port = match port {
            Some(port) => port,
            None => free_port()?,
        };
        let mut args = vec!["--appendonly", "yes", "--appendfsync", "always"];
        args.extend(extra);
        Self::start_on(&binary, port, &args, DataDir::Persistent(dir.to_owned())).await
    }

    /// The directory of its append-only file, when it persists.
    pub fn persistent_dir(&self) -> Option<&Path> {
        match &self.dir {
            DataDir::Persistent(dir) => Some(dir),
            DataDir::Temporary(_) => None,
        }
    }

    /// Starts a redis-server in cluster mode (its `nodes.conf` in its own
    /// directory), not yet part of any cluster: see [`create_cluster`].
    pub async fn start_cluster_node() -> anyhow::Result<Self> {
        Self::start_with(
            None,
            &[
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "5000",
            ],
        )
        .await
    }

    /// Starts a redis-server on a free port that replicates from `master`
    /// (`replicaof`; `up --replica` points it at the replication relay)
    /// and tells its master and the Sentinels its own loopback address
    /// (`replica-announce-ip`; the port it announces is its own, so
    /// Sentinel reaches it directly, never through the relay). Ready once
    /// it listens; [`wait_replicating`] waits for the link.
    pub async fn start_replica(master: std::net::SocketAddr) -> anyhow::Result<Self> {
        let (ip, port) = (master.ip().to_string(), master.port().to_string());
        Self::start_with(
            None,
            &[
                "--replicaof",
                &ip,
                &port,
                "--replica-announce-ip",
                "127.0.0.1",
            ],
        )
        .await
    }

    async fn start_with(port: Option<u16>, extra: &[&str]) -> anyhow::Result<Self> {
        let binary = process::require_program("redis-server", "redis-server")?;
        let attempts = if port.is_some() { 1 } else { 3 };
        let mut last_error = None;
        for _ in 0..attempts {
            let port = match port {
                Some(port) => port,
                None => free_port()?,
            };
            // Marked with our pid: a later start removes it if we are
            // killed before we can.
            let dir = super::run_dir::create_marked(None, "stocklock-redis-")?;
            match Self::start_on(&binary, port, extra, DataDir::Temporary(dir)).await {
                Ok(server) => return Ok(server),
                Err(err) => last_error = Some(err),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("redis-server did not start")))
    }

    async fn start_on(
        binary: &Path,
        port: u16,
        extra: &[&str],
        dir: DataDir,
    ) -> anyhow::Result<Self> {
        let mut child = process::command(binary)
            .args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1"])
            // A flood cannot take the machine's memory, and at the limit
            // writes fail (503) rather than evict: an evicted ledger would
            // be a verdict read from nothing.
            .args(["--maxmemory", MAXMEMORY, "--maxmemory-policy", "noeviction"])
            .args(["--save", ""])
            // Off unless `extra` turns it on (later arguments win).
            .args(["--appendonly", "no"])
            .args(["--daemonize", "no"])
            .args(["--logfile", ""])
            // DEBUG SLEEP is chaos mode's "pause Redis" (loopback only).
            .args(["--enable-debug-command", "local"])
            .args(extra)
            .arg("--dir")
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot run {}", binary.display()))?;
        let stdout = child.stdout.take().context("redis-server stdout")?;
        let (output, ready) =
            process::watch_output(stdout, Some("Ready to accept connections"), None);
        process::wait_ready(&mut child, ready, &output, "redis-server", READY_TIMEOUT).await?;
        Ok(Self {
            process: Running::new(child, output),
            port,
            dir,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

/// Waits (bounded by `within`) until the replica at `url` says
/// `master_link_status:up` in `INFO replication` (it has synced with its
/// master and receives its writes), and then until its master at
/// `master` counts it: a write there is acknowledged within a buyer's
/// `WAIT` ([`crate::knobs::REPLICA_WAIT`]). A master may answer `WAIT` 0
/// for half a second after its new replica's link is up (seen after a
/// Sentinel failover): a buyer's `WAIT` in that window would find no
/// replica.
pub async fn wait_replicating(url: &str, master: &str, within: Duration) -> anyhow::Result<()> {
    let client = redis::Client::open(url)?;
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let info: String = match client.get_multiplexed_async_connection().await {
            Ok(mut conn) => redis::cmd("INFO")
                .arg("replication")
                .query_async(&mut conn)
                .await
                .unwrap_or_default(),
            Err(_) => String::new(),
        };
        if info.contains("master_link_status:up") {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("the replica {url} did not sync within {within:?}: {info}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut conn = redis::Client::open(master)?
        .get_multiplexed_async_connection()
        .await?;
    loop {
        // A write that stores nothing: PUBLISH is replicated too.
        let _: i64 = redis::cmd("PUBLISH")
            .arg("stocklock:replica-probe")
            .arg(url)
            .query_async(&mut conn)
            .await?;
        let acked = crate::store::wait_replicas(&mut conn, 1, crate::knobs::REPLICA_WAIT).await?;
        if acked >= 1 {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("the master {master} did not count its replica {url} within {within:?}");
        }
    }
}

/// Makes one cluster of `nodes` (started by [`RedisServer::start_cluster_node`]),
/// all masters, with `redis-cli --cluster create`, and waits until every
/// node reports `cluster_state:ok`.
pub async fn create_cluster(nodes: &[RedisServer]) -> anyhow::Result<()> {
    let cli = process::require_program("redis-cli", "redis-tools")?;
    let addresses: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port()))
        .collect();
    let output = Command::new(&cli)
        .arg("--cluster")
        .arg("create")
        .args(&addresses)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("cannot run {}", cli.display()))?;
    if !output.status.success() {
        anyhow::bail!(
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // The slots are assigned; the nodes agree on it through their gossip,
    // which has no event to wait for but CLUSTER INFO.
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    for node in nodes {
        let client = redis::Client::open(node.url())?;
        loop {
            let info: String = match client.get_multiplexed_async_connection().await {
                Ok(mut conn) => redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query_async(&mut conn)
                    .await
                    .unwrap_or_default(),
                Err(_) => String::new(),
            };
            if info.contains("cluster_state:ok") {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                anyhow::bail!("the cluster did not reach cluster_state:ok: {info}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}
