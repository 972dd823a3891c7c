//! `up` owns its children: they die with it however it dies (SIGKILL
//! included: nothing keeps a port or a directory), a closed terminal
//! (SIGHUP) is a clean stop, and a Ctrl-C sent to the whole terminal
//! group reaches `up` alone, which stops them once, restarting none.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::{Pid, getpgid};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::mpsc;

use crate::helpers::stack_turn;

/// A server `up` announced (`...: pid N URL`).
#[derive(Debug)]
struct Announced {
    what: String,
    pid: u32,
    port: u16,
}

/// `stocklock up` started the way a terminal starts it: its own process
/// group (the terminal's foreground group), output read line by line.
struct Up {
    child: tokio::process::Child,
    pid: u32,
    stdout: mpsc::UnboundedReceiver<String>,
    stderr: Arc<Mutex<String>>,
    announced: Vec<Announced>,
    _turn: tokio::sync::OwnedSemaphorePermit,
}

fn read_lines(
    output: impl AsyncRead + Unpin + Send + 'static,
    echo: &'static str,
) -> (mpsc::UnboundedReceiver<String>, Arc<Mutex<String>>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let all = Arc::new(Mutex::new(String::new()));
    let kept = all.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(output).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("[{echo}] {line}");
            kept.lock().unwrap().push_str(&format!("{line}\n"));
            let _ = tx.send(line);
        }
    });
    (rx, all)
}

/// `what: pid N scheme://host:PORT[/path]`.
fn parse_announced(line: &str) -> Option<Announced> {
    let (what, rest) = line.split_once(": pid ")?;
    let mut words = rest.split(' ');
    let pid = words.next()?.parse().ok()?;
    let url = words.next()?;
    let port = url.rsplit(':').next()?.split('/').next()?.parse().ok()?;
    Some(Announced {
        what: what.to_owned(),
        pid,
        port,
    })
}

impl Up {
    async fn start(extra: &[&str]) -> Up {
        let turn = stack_turn().await;
        let port = stocklock::os::free_port().unwrap().to_string();
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
            .args(["up", "--port", &port, "--instances", "1", "--etcd", "0"])
            .args(["--zookeeper", "0", "--redlock", "1"])
            .args(extra)
            .env_remove("STOCKLOCK_ADMIN_TOKEN")
            .env_remove("STOCKLOCK_REDIS_URL")
            .env_remove("STOCKLOCK_POSTGRES_URL")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = child.id().unwrap();
        let (stdout, _) = read_lines(child.stdout.take().unwrap(), "up");
        let (_, stderr) = read_lines(child.stderr.take().unwrap(), "up log");
        let mut up = Up {
            child,
            pid,
            stdout,
            stderr,
            announced: Vec::new(),
            _turn: turn,
        };
        up.line("admin token: ", Duration::from_secs(60)).await;
        up
    }

    /// Waits for up's next stdout line starting with `prefix`, taking in
    /// every server announced on the way.
    async fn line(&mut self, prefix: &str, within: Duration) -> String {
        let found = tokio::time::timeout(within, async {
            while let Some(line) = self.stdout.recv().await {
                if let Some(server) = parse_announced(&line) {
                    self.announced.push(server);
                }
                if line.starts_with(prefix) {
                    return line;
                }
            }
            panic!("up's output ended before a line {prefix:?}");
        });
        found
            .await
            .unwrap_or_else(|_| panic!("no line {prefix:?} from up within {within:?}"))
    }

    /// This run's directory: the one whose pid file names this `up`.
    fn run_dir(&self) -> Option<std::path::PathBuf> {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .map(|entry| entry.path())
            .find(|dir| {
                std::fs::read_to_string(dir.join("up.pid"))
                    .is_ok_and(|pid| pid.trim() == self.pid.to_string())
            })
    }

    async fn exited(&mut self) -> std::process::ExitStatus {
        tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("up did not exit within 20 s")
            .unwrap()
    }
}

/// Gone, or a zombie nobody reaped yet (it holds nothing).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // `pid (comm) S ...`: the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

fn port_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// Every server `up` announced is gone and its port free, within `within`
/// (the kernel's death signals are asynchronous; nginx's workers and
/// PostgreSQL's backends follow their masters).
async fn all_gone(servers: &[Announced], within: Duration) {
    let started = Instant::now();
    loop {
        let left: Vec<&Announced> = servers
            .iter()
            .filter(|s| !gone(s.pid) || !port_free(s.port))
            .collect();
        if left.is_empty() {
            eprintln!(
                "all {} servers gone, ports free, after {:?}",
                servers.len(),
                started.elapsed()
            );
            return;
        }
        assert!(
            started.elapsed() < within,
            "left running or holding their port {within:?} after up: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_killed_up_takes_its_children_and_the_next_up_removes_its_directory() {
    let mut up = Up::start(&["--orders", "on"]).await;
    let servers = std::mem::take(&mut up.announced);
    assert!(
        ["redis", "redlock node 1", "postgres", "instance a", "nginx"]
            .iter()
            .all(|what| servers.iter().any(|s| s.what == *what)),
        "{servers:?}"
    );

    kill(Pid::from_raw(up.pid as i32), Signal::SIGKILL).unwrap();
    up.exited().await;
    all_gone(&servers, Duration::from_secs(5)).await;
    let run_dir = up.run_dir().expect("no run directory with up's pid file");
    drop(up);

    let mut next = Up::start(&[]).await;
    assert!(!run_dir.exists(), "the next up kept {}", run_dir.display());
    kill(Pid::from_raw(next.pid as i32), Signal::SIGTERM).unwrap();
    assert!(next.exited().await.success());
}

#[tokio::test]
async fn a_hangup_stops_up_cleanly_with_its_children_and_directory() {
    let mut up = Up::start(&[]).await;
    let run_dir = up.run_dir();
    kill(Pid::from_raw(up.pid as i32), Signal::SIGHUP).unwrap();
    let status = up.exited().await;
    assert!(status.success(), "up exited with {status}");
    all_gone(&up.announced, Duration::from_secs(5)).await;
    let run_dir = run_dir.expect("no run directory with up's pid file");
    assert!(!run_dir.exists(), "up kept {}", run_dir.display());
}

#[tokio::test]
async fn ctrl_c_to_the_terminal_group_reaches_up_alone_and_nothing_restarts() {
    let mut up = Up::start(&["--orders", "on"]).await;
    let group = Pid::from_raw(up.pid as i32);
    for server in &up.announced {
        let own = getpgid(Some(Pid::from_raw(server.pid as i32))).unwrap();
        assert_ne!(own, group, "{server:?} is in up's process group");
    }

    killpg(group, Signal::SIGINT).unwrap();
    let status = up.exited().await;
    assert!(status.success(), "up exited with {status}");
    all_gone(&up.announced, Duration::from_secs(5)).await;
    let log = up.stderr.lock().unwrap().clone();
    assert!(!log.contains("restarting"), "up restarted a child:\n{log}");
}
