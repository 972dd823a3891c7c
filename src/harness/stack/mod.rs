//! A whole stack run as a child `stocklock up`, the way a user runs it, with
//! the handles the lab needs: every process's pid and each instance's own
//! URL (to send a request to one instance, bypassing nginx).

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;
use tokio::sync::mpsc;

use crate::client::StackClient;
use crate::os::{free_port, signal};

mod lines;

/// One instance as `up` announced it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    pub name: String,
    pub pid: u32,
    pub url: String,
}

/// A running stack: one started here (`stocklock up` as a child), or one
/// pointed at (`--target`). Shared by the lab and the test suite.
pub struct Stack {
    /// `None` for a stack this process did not start.
    child: Option<Child>,
    lines: Option<mpsc::UnboundedReceiver<String>>,
    /// nginx: `http://127.0.0.1:PORT`
    pub url: String,
    pub token: String,
    pub instances: Vec<Instance>,
    pub nginx_pid: u32,
    /// The Redis `up` started and its URL (`None` with `--redis-url`).
    pub redis_pid: Option<u32>,
    pub redis_url: Option<String>,
    /// `up --cluster`: the cluster's nodes.
    pub cluster: Vec<Node>,
    /// `up --redlock N`: the Redlock nodes, in order.
    pub redlock_nodes: Vec<Node>,
    pub adopted: Adopted,
    /// `up --etcd N`: the etcd members, in order.
    pub etcd_members: Vec<Node>,
    /// `up --zookeeper N`: the ZooKeeper servers (`url`: `127.0.0.1:PORT`).
    pub zookeeper: Vec<Node>,
    /// `up --replica`: the main Redis's replica (`url`: `redis://127.0.0.1:PORT`).
    pub replica: Option<Node>,
    /// `up --replica`: the replication relay (`url`: `127.0.0.1:PORT`);
    /// SIGSTOP its pid to hold replication back.
    pub relay: Option<Node>,
    /// `up --store-relays`: each instance's relay to Redis, in instance
    /// order (`url`: `127.0.0.1:PORT`); SIGSTOP one to cut its instance off.
    pub relays: Vec<Node>,
    /// `up --replica`: the Sentinels, in order (`url`: `127.0.0.1:PORT`).
    pub sentinels: Vec<Node>,
    /// The PostgreSQL `up` started for the orders (`url`:
    /// `postgresql://stocklock:PASSWORD@127.0.0.1:PORT/stocklock`).
    pub postgres: Option<Node>,
    /// Each instance's `host:port` for Prometheus (none when attached).
    pub prometheus_targets: Vec<String>,
    /// The one-line Prometheus configuration `up` prints for them.
    pub prometheus_config: Option<String>,
    /// The stack's API through nginx, with its admin token once `up` has
    /// printed it ([`StackClient::at`] reaches one instance).
    pub client: StackClient,
}

/// How long the lab waits for any one answer of the stack.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// A redis-server `up` started (a cluster node or a Redlock node).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub pid: u32,
    pub url: String,
}

impl Node {
    /// The port of its `redis://127.0.0.1:PORT` URL.
    pub fn port(&self) -> Option<u16> {
        self.url.rsplit(':').next()?.parse().ok()
    }
}

/// How to start a stack.
#[derive(Clone, Debug, Default)]
pub struct UpOptions {
    /// `--redis-url`; `None`: `up` starts its own Redis.
    pub redis_url: Option<String>,
    /// Further arguments of `stocklock up`.
    pub args: Vec<String>,
    /// The `stocklock` binary (default: this program).
    pub binary: Option<std::path::PathBuf>,
    /// Show up's output (its lines with an `[up]` prefix, and its logs).
    pub echo: bool,
    /// Further environment of `up` and so of its instances (a live
    /// mutant's switch, [`crate::chaos::mutant::VAR`]).
    pub env: Vec<(String, String)>,
}

impl Stack {
    /// Starts `stocklock up --port <free> ...` and waits for its "admin
    /// token" line. A free port can be taken by another process before
    /// nginx binds it: nginx then fails, and another is tried.
    pub async fn start(options: &UpOptions) -> anyhow::Result<Stack> {
        let mut last = None;
        for _ in 0..3 {
            match Self::try_start(options).await {
                Ok(stack) => return Ok(stack),
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("stocklock up did not come up")))
    }

    async fn try_start(options: &UpOptions) -> anyhow::Result<Stack> {
        let port = free_port()?;
        let binary = match &options.binary {
            Some(binary) => binary.clone(),
            None => std::env::current_exe()?,
        };
        // Through `up`'s own wrapper when the command asked its children to
        // die with it (`replay`, `explore`): killed, it leaves no stack.
        let mut command = crate::up::process::command_in_our_group(binary);
        command
            .arg("up")
            .args(["--port", &port.to_string()])
            .args(&options.args)
            .env_remove("STOCKLOCK_ADMIN_TOKEN")
            .env_remove("STOCKLOCK_REDIS_URL")
            .env_remove("STOCKLOCK_POSTGRES_URL")
            .env("RUST_LOG", if options.echo { "warn" } else { "error" })
            .envs(options.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(if options.echo {
                Stdio::inherit()
            } else {
                Stdio::null()
            });
        if let Some(url) = &options.redis_url {
            command.args(["--redis-url", url]);
        }
        let mut child = command.spawn().context("cannot run stocklock up")?;
        let stdout = child.stdout.take().context("up's stdout")?;
        let (tx, lines) = mpsc::unbounded_channel();
        let echo = options.echo;
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if echo {
                    eprintln!("[up] {line}");
                }
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // The port asked for; the token comes with up's last line.
        let client = StackClient::new(&format!("http://127.0.0.1:{port}"), None, ANSWER_TIMEOUT)?;
        let mut stack = Stack::known_as(String::new(), String::new(), client);
        stack.child = Some(child);
        stack.lines = Some(lines);
        if stack
            .next_line("admin token: ", Duration::from_secs(60))
            .await
            .is_none()
        {
            if let Some(child) = stack.child.as_mut() {
                let _ = child.kill().await;
            }
            bail!("stocklock up did not come up");
        }
        // The URL up announced (before the token line), and the token.
        stack.client = StackClient::new(&stack.url, Some(stack.token.clone()), ANSWER_TIMEOUT)?;
        Ok(stack)
    }

    /// How `up` ended, if the stack it started is gone (`None` while it
    /// runs, and for an attached stack).
    pub fn gone(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// Waits for the next line of `up` that starts with `prefix` (taking in
    /// every line on the way). `None` for an attached stack.
    pub async fn next_line(&mut self, prefix: &str, within: Duration) -> Option<String> {
        let mut lines = self.lines.take()?;
        let found = tokio::time::timeout(within, async {
            while let Some(line) = lines.recv().await {
                self.observe(&line);
                if line.starts_with(prefix) {
                    return Some(line);
                }
            }
            None
        })
        .await
        .ok()
        .flatten();
        self.lines = Some(lines);
        found
    }

    /// Attaches to a running stack in chaos mode: its instances (at least
    /// two, healthy) come from the board.
    pub async fn attach(url: &str, token: &str) -> anyhow::Result<Stack> {
        let client = StackClient::new(url, Some(token.to_owned()), ANSWER_TIMEOUT)?;
        let url = client.base().to_owned();
        let instances = board_instances(&client).await?;
        if instances.len() < 2 {
            bail!(
                "{url} shows {} healthy instance(s) on its board; the lab needs two",
                instances.len()
            );
        }
        let mut stack = Stack::known_as(url, token.to_owned(), client);
        stack.instances = instances;
        Ok(stack)
    }

    /// A stack known only by its URL, token and client: no process, no
    /// line read yet, nothing announced.
    fn known_as(url: String, token: String, client: StackClient) -> Stack {
        Stack {
            child: None,
            lines: None,
            url,
            token,
            instances: Vec::new(),
            nginx_pid: 0,
            redis_pid: None,
            redis_url: None,
            cluster: Vec::new(),
            redlock_nodes: Vec::new(),
            adopted: Default::default(),
            etcd_members: Vec::new(),
            zookeeper: Vec::new(),
            replica: None,
            relay: None,
            relays: Vec::new(),
            sentinels: Vec::new(),
            postgres: None,
            prometheus_targets: Vec::new(),
            prometheus_config: None,
            client,
        }
    }

    /// The Sentinels' `127.0.0.1:PORT` (`up --replica`), for
    /// [`crate::up::sentinel::wait_new_master`] and the like.
    pub fn sentinel_addrs(&self) -> Vec<String> {
        self.sentinels.iter().map(|s| s.url.clone()).collect()
    }

    /// The pid of the `up` this process started (`None` when attached).
    pub fn up_pid(&self) -> Option<u32> {
        self.child.as_ref()?.id()
    }

    /// The pid `victim` was restarted as, once `up` (or, attached, the
    /// board) shows it back within `within`; `None` if it did not come back.
    pub async fn restarted(&mut self, victim: &Instance, within: Duration) -> Option<u32> {
        let deadline = std::time::Instant::now() + within;
        loop {
            let left = deadline.checked_duration_since(std::time::Instant::now())?;
            let instance = self.next_instance(left).await?;
            if instance.name == victim.name && instance.pid != victim.pid {
                return Some(instance.pid);
            }
        }
    }

    /// Waits until an instance has (re)started: announced by `up` for a
    /// stack the lab started; seen on the board with a new pid otherwise.
    pub async fn next_instance(&mut self, within: Duration) -> Option<Instance> {
        let deadline = tokio::time::Instant::now() + within;
        if self.lines.is_some() {
            let line = self.next_line("instance ", within).await?;
            return lines::parse_instance(&line);
        }
        // Attached: the board is the only witness (heartbeats every second).
        while tokio::time::Instant::now() < deadline {
            if let Ok(seen) = board_instances(&self.client).await {
                for instance in seen {
                    if let Some(known) = self.instances.iter_mut().find(|i| i.name == instance.name)
                        && known.pid != instance.pid
                    {
                        *known = instance.clone();
                        return Some(instance);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        None
    }

    /// Asks `up` to stop (SIGTERM) and waits for it; it stops its children.
    /// Returns how it exited (`None`: attached, left running; or killed
    /// after 20 s).
    pub async fn stop(mut self) -> Option<std::process::ExitStatus> {
        let child = self.child.as_mut()?;
        if let Some(pid) = child.id() {
            signal(pid, nix::sys::signal::Signal::SIGTERM);
        }
        match tokio::time::timeout(Duration::from_secs(20), child.wait()).await {
            Ok(status) => status.ok(),
            Err(_) => {
                let _ = child.kill().await;
                None
            }
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if let Some(pid) = self.child.as_ref().and_then(Child::id) {
            signal(pid, nix::sys::signal::Signal::SIGTERM);
        }
    }
}

/// Redis servers `explore` started in place of the stack's Redlock nodes,
/// by node; they stop with the stack.
pub type Adopted =
    tokio::sync::Mutex<std::collections::HashMap<usize, crate::up::redis::RedisServer>>;

/// The healthy instances on a stack's board, by name.
async fn board_instances(client: &StackClient) -> anyhow::Result<Vec<Instance>> {
    let board = client.board().await?;
    let mut instances: Vec<Instance> = board
        .instances
        .into_iter()
        .filter(|i| i.healthy && !i.url.is_empty())
        .map(|i| Instance {
            name: i.name,
            pid: i.pid,
            url: i.url,
        })
        .collect();
    instances.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(instances)
}
