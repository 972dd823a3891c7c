//! A redis-server child on loopback, in its own temporary directory, with
//! persistence off. Used by `stocklock up` and by the test suite.

use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use tempfile::TempDir;
use tokio::process::{Child, Command};

use super::process::{self, OutputTail};

/// How long redis-server may take to say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// A running redis-server. Stopped (SIGTERM, then SIGKILL) by [`stop`],
/// killed by pid when dropped.
///
/// [`stop`]: RedisServer::stop
pub struct RedisServer {
    child: Child,
    port: u16,
    output: OutputTail,
    _dir: TempDir,
}

impl RedisServer {
    /// Starts redis-server on `port`, or on a free port when `None` (trying
    /// again with another if the one picked was taken meanwhile).
    pub async fn start(port: Option<u16>) -> anyhow::Result<Self> {
        Self::start_with(port, &[]).await
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

    async fn start_with(port: Option<u16>, extra: &[&str]) -> anyhow::Result<Self> {
        let binary = process::require_program("redis-server", "redis-server")?;
        let attempts = if port.is_some() { 1 } else { 3 };
        let mut last_error = None;
        for _ in 0..attempts {
            let port = match port {
                Some(port) => port,
                None => process::free_port()?,
            };
            match Self::start_on(&binary, port, extra).await {
                Ok(server) => return Ok(server),
                Err(err) => last_error = Some(err),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("redis-server did not start")))
    }

    async fn start_on(binary: &std::path::Path, port: u16, extra: &[&str]) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("stocklock-redis-")
            .tempdir()?;
        let mut child = Command::new(binary)
            .args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
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
            child,
            port,
            output,
            _dir: dir,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The process id (`None` once it has been reaped).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// What redis-server printed (the last lines).
    pub fn log(&self) -> String {
        self.output.text()
    }

    /// Stops the server and waits until it has exited.
    pub async fn stop(&mut self) {
        process::stop(&mut self.child, Duration::from_secs(5)).await;
    }

    /// Resolves when the server exits by itself (or is killed by someone else).
    pub async fn exited(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.child.wait().await
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
