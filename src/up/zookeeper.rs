//! ZooKeeper servers as children on loopback: one standalone server, or an
//! ensemble of N (3 for the failover scenario), each with its own generated
//! `zoo.cfg` and data directory. Used by `stocklock up --zookeeper N` and by
//! the test suite.
//!
//! The server is Debian's `zookeeper` package run without its service
//! scripts: `java -cp /usr/share/java/zookeeper.jar QuorumPeerMain zoo.cfg`
//! (the jar's manifest names the rest of its class path). A standalone
//! server answers in about 0.4 s here (the JVM's start included).
//!
//! Ready means serving: the `srvr` four-letter word (enabled in the config)
//! answers with a `Mode:` line only once the server serves clients (a
//! standalone server, or an ensemble member that has a leader); `ruok`
//! answers `imok` earlier than that, so it is not used.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::process::{self, Running};
use crate::os::free_port;

/// How long a server (or a whole ensemble, which must elect a leader) may
/// take to serve: a JVM start on a busy 2-core machine, then the election.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Where Debian's `zookeeper` package puts the server's jar.
const DEBIAN_JAR: &str = "/usr/share/java/zookeeper.jar";

/// The ZooKeeper tick: sessions are checked for expiry once a tick, and the
/// shortest session timeout allowed is two of them. Short, so that a
/// session timeout (the lock's lease) of a second is allowed and honoured
/// within 100 ms.
const TICK_MS: u32 = 100;

/// A running ZooKeeper server. Stopped (SIGTERM, then SIGKILL) by [`stop`],
/// killed by pid when dropped.
///
/// [`stop`]: super::process::Running::stop
pub struct ZooKeeperServer {
    process: Running,
    /// Its `myid` in the ensemble (1 for a standalone server).
    id: usize,
    port: u16,
    /// Its `zoo.cfg` and data (snapshots, transaction log), removed with it.
    dir: TempDir,
}

/// The ports of one member: clients', followers' to the leader, elections'.
#[derive(Clone, Copy)]
struct MemberPorts {
    client: u16,
    quorum: u16,
    election: u16,
}

process::runs_as_process!(ZooKeeperServer);

impl ZooKeeperServer {
    /// Starts `count` servers under `parent` (each in its own directory):
    /// a standalone server for 1, an ensemble of `count` members otherwise.
    /// Returns when every one of them serves clients.
    pub async fn start_ensemble(count: usize, parent: &Path) -> anyhow::Result<Vec<Self>> {
        anyhow::ensure!(count > 0, "an ensemble needs at least one server");
        let (java, jar) = require_zookeeper()?;
        let ports = (0..count)
            .map(|_| {
                Ok(MemberPorts {
                    client: free_port()?,
                    quorum: free_port()?,
                    election: free_port()?,
                })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        // All members start before any is waited for: an ensemble serves
        // only once a majority is up and has elected a leader.
        let mut servers = Vec::with_capacity(count);
        for (index, own) in ports.iter().enumerate() {
            let id = index + 1;
            let dir = tempfile::Builder::new()
                .prefix(&format!("zookeeper-{id}-"))
                .tempdir_in(parent)
                .with_context(|| format!("cannot create a directory in {}", parent.display()))?;
            let config = zoo_cfg(dir.path(), own.client, (count > 1).then_some(&ports[..]));
            std::fs::write(dir.path().join("zoo.cfg"), config)?;
            std::fs::create_dir_all(dir.path().join("data"))?;
            std::fs::write(dir.path().join("data").join("myid"), format!("{id}\n"))?;
            servers.push(Self::spawn(&java, &jar, id, own.client, dir)?);
        }
        let ready = futures_util::future::join_all(servers.iter_mut().map(Self::wait_ready)).await;
        for result in ready {
            if let Err(err) = result {
                for server in servers.iter_mut() {
                    server.stop().await;
                }
                return Err(err);
            }
        }
        Ok(servers)
    }

    fn spawn(java: &Path, jar: &Path, id: usize, port: u16, dir: TempDir) -> anyhow::Result<Self> {
        let mut child = process::command(java)
            // A lock store for a lab: small heap, the collector that costs
            // least on two cores.
            .args(["-Xmx128m", "-XX:+UseSerialGC"])
            .arg("-Dzookeeper.admin.enableServer=false")
            .arg("-cp")
            .arg(jar)
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
            .arg(dir.path().join("zoo.cfg"))
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot run {}", java.display()))?;
        let stderr = child.stderr.take().context("zookeeper stderr")?;
        let (output, _) = process::watch_output(stderr, None, None);
        Ok(Self {
            process: Running::new(child, output),
            id,
            port,
            dir,
        })
    }

    /// Waits until `srvr` says the server serves, or fails with what it
    /// printed if it exits or the deadline passes. The server announces
    /// nothing on a stream we read, so its port is asked every 50 ms.
    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = self.has_exited()? {
                anyhow::bail!(
                    "zookeeper {} exited ({status}) before it served:\n{}",
                    self.id,
                    self.log()
                );
            }
            let answer = self.srvr().await.unwrap_or_default();
            if answer.contains("Mode: ") {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                anyhow::bail!(
                    "zookeeper {} did not serve on port {} after {READY_TIMEOUT:?} (srvr: {answer:?}):\n{}",
                    self.id,
                    self.port,
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The `srvr` four-letter word's answer (mode, zxid, connections...).
    pub async fn srvr(&self) -> anyhow::Result<String> {
        four_letter_word(self.port, "srvr").await
    }

    /// `standalone`, `leader` or `follower` (from `srvr`), or `None` when
    /// it does not serve.
    pub async fn mode(&self) -> Option<String> {
        mode_at(self.port).await
    }

    /// Its `myid` (1 for a standalone server).
    pub fn id(&self) -> usize {
        self.id
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:PORT`, its clients' address.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Its directory (`zoo.cfg`, `data/`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// The connect string of `servers` (`127.0.0.1:P1,127.0.0.1:P2,...`), what
/// a ZooKeeper client is given.
/// The mode of the server answering on `port`: `standalone`, `leader` or
/// `follower` (from `srvr`), or `None` when it does not serve.
pub async fn mode_at(port: u16) -> Option<String> {
    let answer = four_letter_word(port, "srvr").await.ok()?;
    answer
        .lines()
        .find_map(|line| line.strip_prefix("Mode: "))
        .map(str::to_owned)
}

pub fn connect_string(servers: &[ZooKeeperServer]) -> String {
    servers
        .iter()
        .map(ZooKeeperServer::address)
        .collect::<Vec<_>>()
        .join(",")
}

/// Java and the server's jar, or how to install them.
pub fn require_zookeeper() -> anyhow::Result<(PathBuf, PathBuf)> {
    let java = process::require_program("java", "zookeeper")?;
    let jar = std::env::var_os("STOCKLOCK_ZOOKEEPER_JAR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEBIAN_JAR));
    anyhow::ensure!(
        jar.is_file(),
        "ZooKeeper's server is not installed ({} is missing). Install it with:\n    sudo apt-get update && sudo apt-get install -y zookeeper\n(or name its jar in STOCKLOCK_ZOOKEEPER_JAR)",
        jar.display()
    );
    Ok((java, jar))
}

/// One server's `zoo.cfg`: loopback only, data in `dir/data`, no admin web
/// server, the four-letter words readiness and the lab need (`wchp`: the
/// watches by path, which shows that waiters do not herd). `ensemble`:
/// every member's ports when it is one of several.
fn zoo_cfg(dir: &Path, client_port: u16, ensemble: Option<&[MemberPorts]>) -> String {
    let mut config = format!(
        "tickTime={TICK_MS}\n\
         initLimit=100\n\
         syncLimit=50\n\
         dataDir={}\n\
         clientPort={client_port}\n\
         clientPortAddress=127.0.0.1\n\
         minSessionTimeout={}\n\
         maxSessionTimeout=60000\n\
         admin.enableServer=false\n\
         4lw.commands.whitelist=srvr,ruok,mntr,cons,wchp\n\
         autopurge.purgeInterval=0\n",
        dir.join("data").display(),
        2 * TICK_MS,
    );
    if let Some(members) = ensemble {
        for (index, member) in members.iter().enumerate() {
            config.push_str(&format!(
                "server.{}=127.0.0.1:{}:{}\n",
                index + 1,
                member.quorum,
                member.election
            ));
        }
    }
    config
}

/// Sends a four-letter word to the server on `port` and reads its answer
/// (it closes the connection after answering), within a second.
pub async fn four_letter_word(port: u16, word: &str) -> anyhow::Result<String> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        stream.write_all(word.as_bytes()).await?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await?;
        anyhow::Ok(answer)
    };
    tokio::time::timeout(Duration::from_secs(1), exchange)
        .await
        .context("no answer within 1 s")?
}
