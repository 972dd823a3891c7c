//! An etcd cluster of N members as children, on free loopback ports, each
//! with its data directory under one directory (the run directory of `up`,
//! or a temporary one): the lock store of the `etcd` lock
//! ([`crate::lock::etcd`]). Used by `stocklock up --etcd N` and by the tests,
//! which stop single members to take the cluster's quorum away.
//!
//! A member is ready when its `/health` says `"true"`: it has a leader,
//! which needs a majority of the members up, so all of them are started
//! before any is waited for.

use futures_util::TryFutureExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use tempfile::TempDir;

use super::process::{self, Running};
use crate::os::free_port;

/// How long a new cluster may take to elect a leader and say healthy.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// One `/health` request's bound (a member without a leader answers slowly).
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);
/// Raft's heartbeat and election timeout (etcd's defaults are 100 and 1000
/// ms): a dead leader is replaced within about half a second, and the
/// shortest lease etcd grants (1.5 election timeouts, in whole seconds) is
/// one second, so that the lab's one-second leases are honoured.
const HEARTBEAT_MS: u32 = 100;
const ELECTION_MS: u32 = 500;

/// One running member. Stopped by pid ([`Running::stop`], through
/// `Deref`); killed when dropped.
///
/// [`Running::stop`]: super::process::Running::stop
pub struct EtcdMember {
    process: Running,
    name: String,
    client_port: u16,
}

process::runs_as_process!(EtcdMember);

impl EtcdMember {
    /// `http://127.0.0.1:PORT`: where clients (and the JSON gateway) talk to it.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Which of the members at `urls` leads now, as they say themselves
/// (`/v3/maintenance/status`: its member id is the leader's); its index.
/// A member that does not answer (one killed) is passed over.
pub async fn leader(urls: &[String]) -> anyhow::Result<usize> {
    let http = reqwest::Client::builder().timeout(HEALTH_TIMEOUT).build()?;
    for (index, url) in urls.iter().enumerate() {
        let asked = http
            .post(format!("{url}/v3/maintenance/status"))
            .body("{}")
            .send()
            .await;
        let Ok(status) = futures_util::future::ready(asked)
            .and_then(|r| r.json::<serde_json::Value>())
            .await
        else {
            continue;
        };
        if status["leader"] == status["header"]["member_id"] {
            return Ok(index);
        }
    }
    anyhow::bail!("no etcd member says it leads")
}

/// A cluster of etcd members that know each other from the start
/// (`--initial-cluster-state new`, a token of its own so two clusters on one
/// machine never join).
pub struct EtcdCluster {
    pub members: Vec<EtcdMember>,
    /// The members' data directories live under it (removed with it when temporary).
    _dir: DataDir,
}

enum DataDir {
    Temporary(TempDir),
    Given(PathBuf),
}

impl EtcdCluster {
    /// Starts `n` members (at least one) with their data under `dir` (a
    /// temporary directory when `None`), and waits until each says healthy.
    pub async fn start(n: usize, dir: Option<&Path>) -> anyhow::Result<Self> {
        anyhow::ensure!(n > 0, "an etcd cluster needs at least one member");
        let binary = process::require_program("etcd", "etcd-server")?;
        let dir = match dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
                DataDir::Given(dir.to_owned())
            }
            None => DataDir::Temporary(
                tempfile::Builder::new()
                    .prefix("stocklock-etcd-")
                    .tempdir()?,
            ),
        };
        let root = match &dir {
            DataDir::Temporary(t) => t.path().to_owned(),
            DataDir::Given(p) => p.clone(),
        };
        let ports = (0..n)
            .map(|_| Ok((free_port()?, free_port()?)))
            .collect::<std::io::Result<Vec<(u16, u16)>>>()?;
        let names: Vec<String> = (1..=n).map(|i| format!("m{i}")).collect();
        let initial_cluster = names
            .iter()
            .zip(&ports)
            .map(|(name, (_, peer))| format!("{name}=http://127.0.0.1:{peer}"))
            .collect::<Vec<_>>()
            .join(",");
        let token = format!("stocklock-{}", uuid::Uuid::new_v4().simple());
        let mut members = Vec::with_capacity(n);
        for (name, &(client_port, peer_port)) in names.iter().zip(&ports) {
            let client = format!("http://127.0.0.1:{client_port}");
            let peer = format!("http://127.0.0.1:{peer_port}");
            let mut child = process::command(&binary)
                .args(["--name", name])
                .arg("--data-dir")
                .arg(root.join(name))
                .args(["--listen-client-urls", &client])
                .args(["--advertise-client-urls", &client])
                .args(["--listen-peer-urls", &peer])
                .args(["--initial-advertise-peer-urls", &peer])
                .args(["--initial-cluster", &initial_cluster])
                .args(["--initial-cluster-state", "new"])
                .args(["--initial-cluster-token", &token])
                .args(["--heartbeat-interval", &HEARTBEAT_MS.to_string()])
                .args(["--election-timeout", &ELECTION_MS.to_string()])
                .args(["--logger", "zap", "--log-outputs", "stderr"])
                .args(["--log-level", "warn"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("cannot run {}", binary.display()))?;
            let stderr = child.stderr.take().context("etcd stderr")?;
            let (output, _) = process::watch_output(stderr, None, None);
            members.push(EtcdMember {
                process: Running::new(child, output),
                name: name.clone(),
                client_port,
            });
        }
        let mut cluster = Self { members, _dir: dir };
        let http = reqwest::Client::builder().timeout(HEALTH_TIMEOUT).build()?;
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        for member in &mut cluster.members {
            wait_healthy(&http, member, deadline).await?;
        }
        Ok(cluster)
    }

    /// Every member's client URL, in order.
    pub fn urls(&self) -> Vec<String> {
        self.members.iter().map(EtcdMember::url).collect()
    }

    /// Every member's log, each under its name (for a failing test).
    pub fn logs(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("--- etcd {} ---\n{}", m.name, m.log()))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Stops every member, by pid.
    pub async fn stop(&mut self) {
        for member in &mut self.members {
            member.stop().await;
        }
    }
}

/// Polls the member's `/health` (there is no event to wait for) until it
/// answers `"true"`, failing with its log if it exits or `deadline` passes.
async fn wait_healthy(
    http: &reqwest::Client,
    member: &mut EtcdMember,
    deadline: tokio::time::Instant,
) -> anyhow::Result<()> {
    let url = format!("{}/health", member.url());
    loop {
        if let Some(status) = member.has_exited()? {
            anyhow::bail!(
                "etcd {} exited ({status}) before it was healthy:\n{}",
                member.name,
                member.log()
            );
        }
        let healthy = match http.get(&url).send().await {
            Ok(answer) => answer
                .json::<serde_json::Value>()
                .await
                .is_ok_and(|body| body["health"] == "true"),
            Err(_) => false,
        };
        if healthy {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!(
                "etcd {} was not healthy after {READY_TIMEOUT:?}:\n{}",
                member.name,
                member.log()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
