//! Test fixtures: a real redis-server, a real `stocklock up` stack, and a
//! small concurrent client. Every process a test starts is stopped by pid
//! when its fixture is dropped.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;
use stocklock::up::process::free_port;
use stocklock::up::redis::RedisServer;
use stocklock::wire::StateSnapshot;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{Barrier, mpsc};

/// Starts a redis-server on a free port.
pub(crate) async fn redis() -> RedisServer {
    RedisServer::start(None).await.expect("start redis-server")
}

/// Whether a process with this pid still exists (zombies included).
pub(crate) fn alive(pid: u32) -> bool {
    kill(Pid::from_raw(pid as i32), None).is_ok()
}

/// A `stocklock up` stack run as a child process, the way a user runs it.
pub(crate) struct Stack {
    child: Child,
    /// `http://127.0.0.1:PORT` of nginx.
    pub(crate) url: String,
    pub(crate) token: String,
    /// (instance name, pid, url) as `up` printed them, in order.
    pub(crate) instances: Vec<(String, u32, String)>,
    pub(crate) redis_pid: Option<u32>,
    /// The Redis `up` started (`None` with --redis-url).
    pub(crate) redis_url: Option<String>,
    pub(crate) nginx_pid: u32,
    lines: mpsc::UnboundedReceiver<String>,
    pub(crate) http: reqwest::Client,
}

impl Stack {
    /// `stocklock up` with `instances` instances, its own Redis unless `redis_url` is given.
    pub(crate) async fn start(instances: u16, redis_url: Option<&str>) -> Stack {
        Self::start_with(instances, redis_url, &[]).await
    }

    /// `stocklock up` with extra arguments (e.g. `--chaos`).
    pub(crate) async fn start_with(
        instances: u16,
        redis_url: Option<&str>,
        extra: &[&str],
    ) -> Stack {
        // A free port can be taken by another process before nginx binds it;
        // nginx then fails loudly, and a new port is tried.
        for _ in 0..3 {
            if let Some(stack) = Self::try_start(instances, redis_url, extra).await {
                return stack;
            }
            eprintln!("stocklock up did not come up; trying another port");
        }
        panic!("stocklock up did not come up three times (see its output above)");
    }

    async fn try_start(instances: u16, redis_url: Option<&str>, extra: &[&str]) -> Option<Stack> {
        let port = free_port().expect("free port");
        let mut command = Command::new(env!("CARGO_BIN_EXE_stocklock"));
        command
            .arg("up")
            .args(["--port", &port.to_string()])
            .args(["--instances", &instances.to_string()])
            .env_remove("STOCKLOCK_ADMIN_TOKEN")
            .env_remove("STOCKLOCK_REDIS_URL")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            // Dropped on a failed test: `Drop` asks it to stop (SIGTERM) so it
            // can stop its own children; SIGKILL would orphan them.
            .kill_on_drop(false);
        if let Some(url) = redis_url {
            command.args(["--redis-url", url]);
        }
        command.args(extra);
        let mut child = command.spawn().expect("run stocklock up");
        let stdout = child.stdout.take().unwrap();
        let (tx, mut lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                eprintln!("[up] {line}");
                if tx.send(line).is_err() {
                    break;
                }
            }
        });

        let mut stack = Stack {
            child,
            url: String::new(),
            token: String::new(),
            instances: Vec::new(),
            redis_pid: None,
            redis_url: None,
            nginx_pid: 0,
            lines: mpsc::unbounded_channel().1,
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(256)
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
        };
        let ready = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.recv().await {
                if let Some(rest) = line.strip_prefix("redis: pid ") {
                    stack.redis_pid = rest.split(' ').next().and_then(|p| p.parse().ok());
                    stack.redis_url = rest.split(' ').nth(1).map(str::to_owned);
                } else if let Some(instance) = parse_instance_line(&line) {
                    stack.instances.push(instance);
                } else if let Some(rest) = line.strip_prefix("nginx: pid ") {
                    stack.nginx_pid = rest.split(' ').next().unwrap().parse().unwrap();
                } else if let Some(url) = line.strip_prefix("stocklock is up: ") {
                    stack.url = url.trim_end_matches('/').to_owned();
                } else if let Some(token) = line.strip_prefix("admin token: ") {
                    stack.token = token.to_owned();
                    return true;
                }
            }
            false
        })
        .await;
        if ready != Ok(true) {
            let _ = stack.child.kill().await;
            return None;
        }
        assert_eq!(stack.instances.len(), instances as usize);
        stack.lines = lines;
        Some(stack)
    }

    /// Waits for the next `instance NAME: pid N URL` line (a restart).
    pub(crate) async fn next_instance_line(
        &mut self,
        within: Duration,
    ) -> Option<(String, u32, String)> {
        tokio::time::timeout(within, async {
            while let Some(line) = self.lines.recv().await {
                if let Some(instance) = parse_instance_line(&line) {
                    return Some(instance);
                }
            }
            None
        })
        .await
        .ok()
        .flatten()
    }

    /// Waits for the next line of `up` that starts with `prefix`.
    pub(crate) async fn next_line(&mut self, prefix: &str, within: Duration) -> Option<String> {
        tokio::time::timeout(within, async {
            while let Some(line) = self.lines.recv().await {
                if line.starts_with(prefix) {
                    return Some(line);
                }
            }
            None
        })
        .await
        .ok()
        .flatten()
    }

    /// `POST /api/admin/reset` through nginx.
    pub(crate) async fn reset(&self, sku: &str, stock: i64) -> StateSnapshot {
        let response = self
            .http
            .post(format!("{}/api/admin/reset", self.url))
            .bearer_auth(&self.token)
            .json(&serde_json::json!({ "sku": sku, "stock": stock }))
            .send()
            .await
            .expect("reset");
        assert_eq!(response.status(), 200, "reset failed");
        response.json().await.unwrap()
    }

    pub(crate) async fn state(&self, sku: &str) -> StateSnapshot {
        let response = self
            .http
            .get(format!("{}/api/state?sku={sku}", self.url))
            .send()
            .await
            .expect("state");
        assert_eq!(response.status(), 200);
        response.json().await.unwrap()
    }

    /// Sends SIGTERM to `up` and asserts it exits cleanly, leaving none of
    /// its children behind.
    pub(crate) async fn stop(mut self) {
        let pid = self.child.id().expect("up still running");
        kill(Pid::from_raw(pid as i32), Signal::SIGTERM).unwrap();
        let status = tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("up did not stop within 20 s")
            .unwrap();
        assert!(status.success(), "up exited with {status}");
        let mut children: Vec<u32> = self.instances.iter().map(|(_, pid, _)| *pid).collect();
        children.push(self.nginx_pid);
        children.extend(self.redis_pid);
        for child in children {
            assert!(!alive(child), "up left pid {child} running");
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if let Some(pid) = self.child.id() {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
        }
    }
}

fn parse_instance_line(line: &str) -> Option<(String, u32, String)> {
    let rest = line.strip_prefix("instance ")?;
    let (name, rest) = rest.split_once(": pid ")?;
    let (pid, url) = rest.split_once(' ')?;
    Some((name.to_owned(), pid.parse().ok()?, url.to_owned()))
}

/// What a burst of requests came back with, counted by the client.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) by_status: BTreeMap<u16, usize>,
    /// Answers per instance, from the JSON body.
    pub(crate) by_instance: BTreeMap<String, usize>,
    /// Units the client was told it bought.
    pub(crate) units: Vec<i64>,
}

impl Tally {
    pub(crate) fn count(&self, status: u16) -> usize {
        self.by_status.get(&status).copied().unwrap_or(0)
    }

    pub(crate) fn total(&self) -> usize {
        self.by_status.values().sum()
    }
}

/// Sends `requests` GETs to `url` from `concurrency` workers released at
/// once (a flash-sale start), and tallies the answers.
pub(crate) async fn burst(
    http: &reqwest::Client,
    url: &str,
    requests: usize,
    concurrency: usize,
) -> Tally {
    let next = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(Barrier::new(concurrency));
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let (http, url, next, barrier) =
            (http.clone(), url.to_owned(), next.clone(), barrier.clone());
        workers.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            barrier.wait().await;
            while next.fetch_add(1, Ordering::Relaxed) < requests {
                let response = http.get(&url).send().await.expect("request failed");
                let status = response.status().as_u16();
                let body: Value = response.json().await.expect("JSON body");
                *tally.by_status.entry(status).or_default() += 1;
                if let Some(instance) = body["instance"].as_str() {
                    *tally.by_instance.entry(instance.to_owned()).or_default() += 1;
                }
                if status == 200 {
                    tally
                        .units
                        .push(body["unit"].as_i64().expect("unit of a sale"));
                }
            }
            tally
        }));
    }
    let mut total = Tally::default();
    for worker in workers {
        let tally = worker.await.unwrap();
        for (status, n) in tally.by_status {
            *total.by_status.entry(status).or_default() += n;
        }
        for (instance, n) in tally.by_instance {
            *total.by_instance.entry(instance).or_default() += n;
        }
        total.units.extend(tally.units);
    }
    total
}

/// `node --check FILE` (as an ES module when `module`): `false`, with a
/// visible note, when node is not installed.
pub(crate) fn node_check(file: &std::path::Path, module: bool) -> bool {
    let Some(node) = stocklock::up::process::find_program("node") else {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED node --check {}: node is not installed",
            file.display()
        );
        return false;
    };
    // node checks ES modules as such only by their .mjs name.
    let dir = tempfile::tempdir().unwrap();
    let checked = if module {
        let copy = dir.path().join("checked.mjs");
        std::fs::copy(file, &copy).unwrap();
        copy
    } else {
        file.to_owned()
    };
    let out = std::process::Command::new(node)
        .arg("--check")
        .arg(&checked)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    true
}
