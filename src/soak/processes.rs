//! Processes the nemesis freezes, or kills and starts again as they were;
//! and its small helpers (a chaos action sent patiently, a pick).

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nix::sys::signal::Signal;
use tokio::process::Child;

use crate::harness::stack::{Node, Stack};
use crate::os::{freeze, signal};

/// How long a crash may take to be followed by its instance's restart,
/// and a server started again to listen.
pub(super) const RESTART_WITHIN: Duration = Duration::from_secs(30);

/// Freezes `pids` (a process, then its children) for `hold`, then lets
/// them run again.
pub(super) async fn frozen(pids: &[u32], hold: Duration) -> anyhow::Result<()> {
    let mut stopped = Vec::new();
    let mut result = Ok(());
    for (k, &pid) in pids.iter().enumerate() {
        match freeze(pid).await {
            Ok(()) => stopped.push(pid),
            // A child that exited since it was listed (a backend whose
            // client left, PostgreSQL's startup process done with its
            // recovery after a crash) has nothing left to freeze.
            Err(_) if k > 0 && crate::os::is_gone(pid) => {}
            Err(err) => {
                result = Err(err);
                break;
            }
        }
    }
    if result.is_ok() {
        tokio::time::sleep(hold).await;
    }
    for pid in stopped {
        signal(pid, Signal::SIGCONT);
    }
    result
}

/// How a running process was started: its command line, directory and
/// environment, read from `/proc` before it is killed.
pub(super) struct Respawn {
    argv: Vec<String>,
    cwd: std::path::PathBuf,
    env: Vec<(String, String)>,
}

impl Respawn {
    pub(super) fn of(pid: u32) -> anyhow::Result<Respawn> {
        let split = |bytes: Vec<u8>| -> Vec<String> {
            bytes
                .split(|b| *b == 0)
                .filter(|part| !part.is_empty())
                .map(|part| String::from_utf8_lossy(part).into_owned())
                .collect()
        };
        let argv = split(std::fs::read(format!("/proc/{pid}/cmdline"))?);
        let env = split(std::fs::read(format!("/proc/{pid}/environ"))?)
            .into_iter()
            .filter_map(|kv| {
                kv.split_once('=')
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
            })
            .collect();
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd"))?;
        if argv.is_empty() {
            bail!("process {pid} has no command line (gone?)");
        }
        Ok(Respawn { argv, cwd, env })
    }

    pub(super) fn spawn(&self) -> anyhow::Result<Child> {
        crate::up::process::command(&self.argv[0])
            .args(&self.argv[1..])
            .current_dir(&self.cwd)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {} again", self.argv[0]))
    }
}

/// Waits until a server started again accepts connections on `port`.
pub(super) async fn listening(port: u16) -> anyhow::Result<()> {
    let deadline = Instant::now() + RESTART_WITHIN;
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        if Instant::now() > deadline {
            bail!(
                "started again, it did not listen on {port} within {} s",
                RESTART_WITHIN.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

#[derive(Clone, Copy)]
pub(super) enum Server {
    Redlock,
    Etcd,
    Zookeeper,
}

impl Server {
    pub(super) fn name(self) -> &'static str {
        match self {
            Server::Redlock => "redlock node",
            Server::Etcd => "etcd member",
            Server::Zookeeper => "zookeeper",
        }
    }

    pub(super) fn nodes(self, stack: &Stack) -> &[Node] {
        match self {
            Server::Redlock => &stack.redlock_nodes,
            Server::Etcd => &stack.etcd_members,
            Server::Zookeeper => &stack.zookeeper,
        }
    }

    pub(super) fn nodes_mut(self, stack: &mut Stack) -> &mut Vec<Node> {
        match self {
            Server::Redlock => &mut stack.redlock_nodes,
            Server::Etcd => &mut stack.etcd_members,
            Server::Zookeeper => &mut stack.zookeeper,
        }
    }
}

/// A chaos action sent until the stack takes it (a few tries, half a
/// second apart): another fault may have the instance nginx picked down,
/// or Redis loading its data.
pub(super) async fn patiently(
    client: &crate::client::StackClient,
    action: serde_json::Value,
) -> anyhow::Result<serde_json::Value> {
    let mut tries = 0;
    loop {
        match client.chaos(&action).await {
            Err(_) if tries < 6 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            done => return done,
        }
    }
}

/// Every instance's pid, in order.
pub(super) fn pids(stack: &Stack) -> Vec<u32> {
    stack.instances.iter().map(|i| i.pid).collect()
}

pub(super) fn pick<T>(items: &[T], pick: u32) -> anyhow::Result<&T> {
    if items.is_empty() {
        bail!("nothing of that kind in this stack");
    }
    Ok(&items[pick as usize % items.len()])
}
