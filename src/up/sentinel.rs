//! `up --replica`: one replica of the main Redis, replicating through the
//! [relay](super::relay), and three Sentinels (Debian's `redis-sentinel`)
//! that watch the master and fail over to the replica when it dies; and
//! the functions the lab and the tests ask the Sentinels with.
//!
//! Each Sentinel is a child with its own generated config file in its own
//! directory of up's run directory (a Sentinel rewrites its config file).
//! They monitor the master as [`MASTER_NAME`] with a quorum of 2, call it
//! down after [`DOWN_AFTER`] without an answer, and finish a failover in a
//! few seconds. Ready means real events, never a pause: the replica's link
//! is up, and every Sentinel names the master, lists the replica with its
//! link `ok` and knows the two other Sentinels (without them it could not
//! reach its quorum).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};

use super::process::{self, Running};
use super::redis::RedisServer;
use super::relay::Relay;
use crate::os::free_port;

/// The name the Sentinels know the master by.
pub const MASTER_NAME: &str = crate::store::SENTINEL_MASTER;
/// How many Sentinels `up --replica` starts.
pub const SENTINELS: usize = 3;
/// How many Sentinels must agree the master is down.
pub const QUORUM: usize = 2;
/// Silence after which a Sentinel calls the master down.
pub const DOWN_AFTER: Duration = Duration::from_millis(1000);
/// Sentinel's `failover-timeout`: a failover that stalls is retried after
/// twice this.
pub const FAILOVER_TIMEOUT: Duration = Duration::from_millis(3000);
/// How long the replica and the Sentinels may take to be ready.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A running Sentinel.
pub struct SentinelServer {
    process: Running,
    port: u16,
}

process::runs_as_process!(SentinelServer);

impl SentinelServer {
    /// Starts a Sentinel on a free port with its config file in `dir`,
    /// monitoring the master at `master` as [`MASTER_NAME`]; ready once it
    /// says it monitors it (see [`wait_ready`] for the whole group).
    pub async fn start(dir: &Path, master: SocketAddr) -> anyhow::Result<SentinelServer> {
        let binary = process::require_program("redis-sentinel", "redis-sentinel")?;
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let mut last = None;
        for _ in 0..3 {
            let port = free_port()?;
            let config = dir.join("sentinel.conf");
            std::fs::write(&config, sentinel_conf(port, dir, master))
                .with_context(|| format!("cannot write {}", config.display()))?;
            let mut child = process::command(&binary)
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("cannot run {}", binary.display()))?;
            let stdout = child.stdout.take().context("redis-sentinel stdout")?;
            let (output, ready) = process::watch_output(stdout, Some("+monitor master"), None);
            match process::wait_ready(&mut child, ready, &output, "redis-sentinel", READY_TIMEOUT)
                .await
            {
                Ok(_) => {
                    return Ok(SentinelServer {
                        process: Running::new(child, output),
                        port,
                    });
                }
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("redis-sentinel did not start")))
    }

    /// `127.0.0.1:PORT`
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

/// A Sentinel's config file.
fn sentinel_conf(port: u16, dir: &Path, master: SocketAddr) -> String {
    format!(
        "port {port}\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\nlogfile \"\"\n\
         dir \"{dir}\"\n\
         sentinel monitor {MASTER_NAME} {ip} {master_port} {QUORUM}\n\
         sentinel down-after-milliseconds {MASTER_NAME} {down}\n\
         sentinel failover-timeout {MASTER_NAME} {failover}\n\
         sentinel parallel-syncs {MASTER_NAME} 1\n",
        dir = dir.display(),
        ip = master.ip(),
        master_port = master.port(),
        down = DOWN_AFTER.as_millis(),
        failover = FAILOVER_TIMEOUT.as_millis(),
    )
}

/// The replica, its relay and the Sentinels of `up --replica`.
pub struct ReplicaSet {
    pub replica: RedisServer,
    pub relay: Relay,
    pub sentinels: Vec<SentinelServer>,
}

impl ReplicaSet {
    /// Starts the relay to `master`, a replica replicating through it and
    /// [`SENTINELS`] Sentinels (their files in `run_dir/sentinel-N`), and
    /// waits until the replica has synced and every Sentinel is ready.
    pub async fn start(master: &RedisServer, run_dir: &Path) -> anyhow::Result<ReplicaSet> {
        process::require_program("redis-sentinel", "redis-sentinel")?;
        let master_addr = SocketAddr::from(([127, 0, 0, 1], master.port()));
        let relay = Relay::start(master_addr).await?;
        let replica = RedisServer::start_replica(relay.listen()).await?;
        super::redis::wait_replicating(&replica.url(), &master.url(), READY_TIMEOUT).await?;
        let mut sentinels = Vec::new();
        for n in 1..=SENTINELS {
            let dir = run_dir.join(format!("sentinel-{n}"));
            sentinels.push(SentinelServer::start(&dir, master_addr).await?);
        }
        let set = ReplicaSet {
            replica,
            relay,
            sentinels,
        };
        wait_ready(
            &set.addresses(),
            master_addr,
            set.replica.port(),
            READY_TIMEOUT,
        )
        .await?;
        Ok(set)
    }

    /// The Sentinels' `127.0.0.1:PORT`, in order (what `serve --sentinel` takes).
    pub fn addresses(&self) -> Vec<String> {
        self.sentinels.iter().map(SentinelServer::address).collect()
    }

    /// Stops the Sentinels first (no failover of a stack going away), then
    /// the replica and the relay.
    pub async fn stop(&mut self) {
        for sentinel in &mut self.sentinels {
            sentinel.stop().await;
        }
        self.replica.stop().await;
        self.relay.stop().await;
    }
}

/// A connection to one Sentinel (or any Redis) at `host:port`.
async fn connect(address: &str) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
    let client = redis::Client::open(crate::store::sentinel::sentinel_url(address))?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(500)))
        .set_response_timeout(Some(Duration::from_millis(500)));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

/// `SENTINEL <what> <name>` on one Sentinel.
async fn ask<T: redis::FromRedisValue>(
    sentinel: &str,
    what: &str,
    name: &str,
) -> redis::RedisResult<T> {
    let mut conn = connect(sentinel).await?;
    redis::cmd("SENTINEL")
        .arg(what)
        .arg(name)
        .query_async(&mut conn)
        .await
}

/// The master's `ip:port` as one Sentinel names it
/// (`SENTINEL get-master-addr-by-name`); `None` when it knows no such master.
pub async fn master_of(sentinel: &str, name: &str) -> anyhow::Result<Option<SocketAddr>> {
    let answer: Option<(String, u16)> = ask(sentinel, "get-master-addr-by-name", name)
        .await
        .with_context(|| format!("Sentinel {sentinel} did not answer"))?;
    Ok(match answer {
        Some((ip, port)) => Some(SocketAddr::new(
            ip.parse()
                .with_context(|| format!("Sentinel {sentinel} named {ip:?}"))?,
            port,
        )),
        None => None,
    })
}

/// Who the master is: the address most of `sentinels` name (one that
/// answers is enough; an error when none names one).
pub async fn master_addr(sentinels: &[String], name: &str) -> anyhow::Result<SocketAddr> {
    let mut votes: Vec<(SocketAddr, usize)> = Vec::new();
    let mut last = None;
    for sentinel in sentinels {
        match master_of(sentinel, name).await {
            Ok(Some(addr)) => match votes.iter_mut().find(|(a, _)| *a == addr) {
                Some((_, n)) => *n += 1,
                None => votes.push((addr, 1)),
            },
            Ok(None) => last = Some(anyhow::anyhow!("{sentinel} knows no master {name}")),
            Err(err) => last = Some(err),
        }
    }
    // The first of the most named: stable when they agree, as they do
    // between failovers.
    let most = votes.iter().map(|(_, n)| *n).max().unwrap_or(0);
    match votes.into_iter().find(|(_, n)| *n == most) {
        Some((addr, _)) => Ok(addr),
        None => Err(last.unwrap_or_else(|| anyhow::anyhow!("no Sentinel given"))),
    }
}

/// Whether the server at `addr` says `ROLE` master.
pub async fn is_master(addr: SocketAddr) -> bool {
    let Ok(mut conn) = connect(&addr.to_string()).await else {
        return false;
    };
    let role: redis::RedisResult<Vec<redis::Value>> =
        redis::cmd("ROLE").query_async(&mut conn).await;
    matches!(role.as_deref(), Ok([redis::Value::BulkString(first), ..]) if first == b"master")
}

/// Waits, bounded by `within`, until a Sentinel names a master other than
/// `old` and that server answers `ROLE` as master: the failover is done.
/// Polls the Sentinels' answer (every 20 ms); returns the new master's
/// `redis://IP:PORT`.
pub async fn wait_new_master(
    sentinels: &[String],
    name: &str,
    old: SocketAddr,
    within: Duration,
) -> anyhow::Result<String> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        for sentinel in sentinels {
            if let Ok(Some(addr)) = master_of(sentinel, name).await
                && addr != old
                && is_master(addr).await
            {
                return Ok(format!("redis://{addr}"));
            }
        }
        if tokio::time::Instant::now() > deadline {
            bail!("no Sentinel named a master other than {old} within {within:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until every Sentinel names `master`, lists the replica on
/// `replica_port` with its link `ok`, and knows every other Sentinel.
pub async fn wait_ready(
    sentinels: &[String],
    master: SocketAddr,
    replica_port: u16,
    within: Duration,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + within;
    for sentinel in sentinels {
        loop {
            let state = sentinel_state(sentinel, master, replica_port).await;
            let missing = match &state {
                Ok(others) if *others + 1 >= sentinels.len() => break,
                Ok(others) => format!("it knows {others} other Sentinel(s)"),
                Err(err) => format!("{err:#}"),
            };
            if tokio::time::Instant::now() > deadline {
                bail!("Sentinel {sentinel} not ready within {within:?}: {missing}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

/// How many other Sentinels `sentinel` knows, once it names `master` and
/// sees the replica's link up; an error saying what is missing before.
async fn sentinel_state(
    sentinel: &str,
    master: SocketAddr,
    replica_port: u16,
) -> anyhow::Result<usize> {
    let named = master_of(sentinel, MASTER_NAME).await?;
    if named != Some(master) {
        bail!("it names {named:?} as master");
    }
    let replicas: Vec<HashMap<String, String>> = ask(sentinel, "replicas", MASTER_NAME).await?;
    let linked = replicas.iter().any(|r| {
        r.get("port").and_then(|p| p.parse().ok()) == Some(replica_port)
            && r.get("flags").is_some_and(|f| f == "slave")
            && r.get("master-link-status").is_some_and(|s| s == "ok")
    });
    if !linked {
        bail!("it does not list the replica on port {replica_port} with its link ok: {replicas:?}");
    }
    let others: Vec<HashMap<String, String>> = ask(sentinel, "sentinels", MASTER_NAME).await?;
    Ok(others.len())
}
