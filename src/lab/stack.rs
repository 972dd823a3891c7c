//! A whole stack run as a child `stocklock up`, the way a user runs it, with
//! the handles the lab needs: every process's pid and each instance's own
//! URL (to send a request to one instance, bypassing nginx).

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use crate::up::process::{free_port, signal};
use crate::wire::StateSnapshot;

/// One instance as `up` announced it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    pub name: String,
    pub pid: u32,
    pub url: String,
}

/// A running stack: one the lab started (`stocklock up` as a child), or
/// one it was pointed at (`--target`).
pub struct Stack {
    /// `None` for a stack the lab did not start.
    child: Option<Child>,
    lines: Option<mpsc::UnboundedReceiver<String>>,
    /// nginx: `http://127.0.0.1:PORT`
    pub url: String,
    pub token: String,
    pub instances: Vec<Instance>,
    pub nginx_pid: u32,
    pub http: reqwest::Client,
}

fn parse_instance(line: &str) -> Option<Instance> {
    let rest = line.strip_prefix("instance ")?;
    let (name, rest) = rest.split_once(": pid ")?;
    let (pid, url) = rest.split_once(' ')?;
    Some(Instance {
        name: name.to_owned(),
        pid: pid.parse().ok()?,
        url: url.to_owned(),
    })
}

impl Stack {
    /// Starts `stocklock up --port <free> --redis-url REDIS ARGS...` and
    /// waits for its "admin token" line. A free port can be taken by another
    /// process before nginx binds it: nginx then fails, and another is tried.
    pub async fn start(redis_url: &str, args: &[String]) -> anyhow::Result<Stack> {
        let mut last = None;
        for _ in 0..3 {
            match Self::try_start(redis_url, args).await {
                Ok(stack) => return Ok(stack),
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("stocklock up did not come up")))
    }

    async fn try_start(redis_url: &str, args: &[String]) -> anyhow::Result<Stack> {
        let port = free_port()?;
        let mut child = Command::new(std::env::current_exe()?)
            .arg("up")
            .args(["--port", &port.to_string(), "--redis-url", redis_url])
            .args(args)
            .env_remove("STOCKLOCK_ADMIN_TOKEN")
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot run stocklock up")?;
        let stdout = child.stdout.take().context("up's stdout")?;
        let (tx, mut lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let (mut url, mut instances, mut nginx_pid) = (String::new(), Vec::new(), 0);
        let token = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.recv().await {
                if let Some(instance) = parse_instance(&line) {
                    instances.push(instance);
                } else if let Some(rest) = line.strip_prefix("nginx: pid ") {
                    nginx_pid = rest
                        .split(' ')
                        .next()
                        .and_then(|p| p.parse().ok())
                        .unwrap_or(0);
                } else if let Some(rest) = line.strip_prefix("stocklock is up: ") {
                    url = rest.trim_end_matches('/').to_owned();
                } else if let Some(token) = line.strip_prefix("admin token: ") {
                    return Some(token.to_owned());
                }
            }
            None
        })
        .await;
        let Ok(Some(token)) = token else {
            let _ = child.kill().await;
            bail!("stocklock up did not come up");
        };
        Ok(Stack {
            child: Some(child),
            lines: Some(lines),
            url,
            token,
            instances,
            nginx_pid,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .pool_max_idle_per_host(64)
                .build()?,
        })
    }

    /// Attaches to a running stack in chaos mode: its instances (at least
    /// two, healthy) come from the board.
    pub async fn attach(url: &str, token: &str) -> anyhow::Result<Stack> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(64)
            .build()?;
        let url = url.trim_end_matches('/').to_owned();
        let instances = board_instances(&http, &url).await?;
        if instances.len() < 2 {
            bail!(
                "{url} shows {} healthy instance(s) on its board; the lab needs two",
                instances.len()
            );
        }
        Ok(Stack {
            child: None,
            lines: None,
            url,
            token: token.to_owned(),
            instances,
            nginx_pid: 0,
            http,
        })
    }

    /// Waits until an instance has (re)started: announced by `up` for a
    /// stack the lab started; seen on the board with a new pid otherwise.
    pub async fn next_instance(&mut self, within: Duration) -> Option<Instance> {
        let deadline = tokio::time::Instant::now() + within;
        if let Some(lines) = self.lines.as_mut() {
            let found = tokio::time::timeout_at(deadline, async {
                while let Some(line) = lines.recv().await {
                    if let Some(instance) = parse_instance(&line) {
                        return Some(instance);
                    }
                }
                None
            })
            .await
            .ok()
            .flatten();
            if let Some(instance) = &found
                && let Some(known) = self.instances.iter_mut().find(|i| i.name == instance.name)
            {
                *known = instance.clone();
            }
            return found;
        }
        // Attached: the board is the only witness (heartbeats every second).
        while tokio::time::Instant::now() < deadline {
            if let Ok(seen) = board_instances(&self.http, &self.url).await {
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

    /// An admin POST through nginx.
    pub async fn admin(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        let response = self
            .http
            .post(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await?;
        let status = response.status();
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            bail!("POST {path}: {status}: {answer}");
        }
        Ok(answer)
    }

    pub async fn reset(&self, sku: &str, stock: i64) -> anyhow::Result<()> {
        self.admin(
            "/api/admin/reset",
            serde_json::json!({"sku": sku, "stock": stock}),
        )
        .await
        .map(|_| ())
    }

    pub async fn chaos(&self, action: Value) -> anyhow::Result<Value> {
        self.admin("/api/admin/chaos", action).await
    }

    pub async fn state(&self, sku: &str) -> anyhow::Result<StateSnapshot> {
        Ok(self
            .http
            .get(format!("{}/api/state?sku={sku}", self.url))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?)
    }

    /// One GET; the status and the JSON body (or `null`).
    pub async fn get(&self, url: &str) -> (u16, Value) {
        match self.http.get(url).send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                (status, response.json().await.unwrap_or(Value::Null))
            }
            Err(_) => (0, Value::Null),
        }
    }

    /// Asks `up` to stop (SIGTERM) and waits for it; it stops its children.
    /// An attached stack is left running.
    pub async fn stop(mut self) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        if let Some(pid) = child.id() {
            signal(pid, nix::sys::signal::Signal::SIGTERM);
        }
        if tokio::time::timeout(Duration::from_secs(20), child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
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

/// The healthy instances on a stack's board, by name.
async fn board_instances(http: &reqwest::Client, url: &str) -> anyhow::Result<Vec<Instance>> {
    let board: crate::wire::Board = http
        .get(format!("{url}/api/board"))
        .send()
        .await
        .with_context(|| format!("cannot reach {url}"))?
        .error_for_status()?
        .json()
        .await?;
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
