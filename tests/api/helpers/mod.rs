//! Test fixtures: a real redis-server, a real `stocklock up` stack, one
//! instance driven in-process ([`InProcess`], `in_process.rs`), a small
//! concurrent client, and watches on Redis (`watch.rs`). Every process a
//! test starts is stopped by pid when its fixture is dropped.

mod in_process;
mod watch;

pub(crate) use in_process::*;
pub(crate) use watch::*;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::Body;
use axum::http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use nix::sys::signal::kill;
use nix::unistd::Pid;
use serde_json::Value;
use stocklock::chaos::Chaos;
use stocklock::harness::stack::UpOptions;
use stocklock::http::{AppState, InstanceConfig, app};
use stocklock::lock::Wakeups;
use stocklock::store::Store;
use stocklock::up::redis::RedisServer;
use stocklock::variants::Variant;
use stocklock::wire::StateSnapshot;
use tokio::sync::Barrier;
use tower::ServiceExt;

/// Starts a redis-server on a free port.
pub(crate) async fn redis() -> RedisServer {
    RedisServer::start(None).await.expect("start redis-server")
}

/// Whether a process with this pid still exists (zombies included).
pub(crate) fn alive(pid: u32) -> bool {
    kill(Pid::from_raw(pid as i32), None).is_ok()
}

/// Whole stacks take turns, four at a time. Each runs redis-server,
/// instances and nginx; more at once (more test threads on a bigger
/// machine, or suites side by side) starve each other on a 2-core machine
/// until Redis answers slower than an instance's 1 s timeout, and honest
/// 503s then fail tests that expect none. The suite runs six tests at a
/// time (scripts/test.sh): four with a stack, the others beside them.
pub(crate) async fn stack_turn() -> tokio::sync::OwnedSemaphorePermit {
    const AT_ONCE: usize = 4;
    static TURNS: std::sync::LazyLock<Arc<tokio::sync::Semaphore>> =
        std::sync::LazyLock::new(|| Arc::new(tokio::sync::Semaphore::new(AT_ONCE)));
    let turn = TURNS.clone().acquire_owned();
    tokio::time::timeout(std::time::Duration::from_secs(900), turn)
        .await
        .expect("no stack's turn within 15 minutes: a test holds two stacks?")
        .expect("the turns are never closed")
}

/// A `stocklock up` stack run as a child process, the way a user runs it:
/// the lab's own harness ([`stocklock::harness::stack::Stack`], reached through
/// `Deref`), with answers unwrapped and a stop that checks nothing is left.
/// It holds the machine's turn ([`stack_turn`]) for as long as it lives.
pub(crate) struct Stack(
    stocklock::harness::stack::Stack,
    #[allow(dead_code)] tokio::sync::OwnedSemaphorePermit,
);

impl std::ops::Deref for Stack {
    type Target = stocklock::harness::stack::Stack;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Stack {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// Runs a test's body, failing the test if it takes longer than `bound`:
/// a test fails rather than hangs.
pub(crate) async fn within<T>(
    bound: std::time::Duration,
    body: impl std::future::Future<Output = T>,
) -> T {
    tokio::time::timeout(bound, body)
        .await
        .unwrap_or_else(|_| panic!("the test did not finish within {bound:?}"))
}

/// A plain connection to the Redis at `redis_url`.
pub(crate) async fn redis_conn(redis_url: &str) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(redis_url).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

/// Returns once Redis is paused: a PING on `probe`, a connection made
/// before the pause, goes unanswered for 50 ms (within 5 s, or the test fails).
pub(crate) async fn until_paused(probe: &mut redis::aio::MultiplexedConnection) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let ping = redis::cmd("PING");
        let answer = ping.query_async::<String>(probe);
        if tokio::time::timeout(std::time::Duration::from_millis(50), answer)
            .await
            .is_err()
        {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "Redis never paused");
    }
}

/// A measured figure, on stderr itself (the harness captures `eprintln!`).
pub(crate) fn note(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// `up`'s flags for the smallest etcd cluster and ZooKeeper (one member,
/// one server) and a PostgreSQL (the pg-* variants' stock): for the stacks
/// of tests that run every variant.
pub(crate) const LOCK_STORES: &[&str] = &["--etcd", "1", "--zookeeper", "1", "--orders", "on"];

/// The variants an in-process instance serves: it is given Redlock's
/// "nodes" (databases of its own Redis) but no etcd, ZooKeeper or
/// PostgreSQL, whose variants answer 503 `not_configured` there and run in
/// the stack tests.
pub(crate) fn in_process_variants() -> impl Iterator<Item = Variant> {
    Variant::ALL
        .into_iter()
        .filter(|v| !matches!(v, Variant::Etcd | Variant::ZooKeeper) && !v.stock_in_postgres())
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
        Self::start_mutated(instances, redis_url, extra, None).await
    }

    /// [`Stack::start_with`], its instances running the live mutant
    /// `mutant` (a debug build's `STOCKLOCK_MUTANT`) if one is named.
    pub(crate) async fn start_mutated(
        instances: u16,
        redis_url: Option<&str>,
        extra: &[&str],
        mutant: Option<&str>,
    ) -> Stack {
        let mut args = vec!["--instances".to_owned(), instances.to_string()];
        // No etcd cluster, ZooKeeper or PostgreSQL unless a test asks for one
        // ([`LOCK_STORES`]): they add seconds (and a JVM) to a stack's start.
        if !extra.contains(&"--etcd") {
            args.extend(["--etcd".to_owned(), "0".to_owned()]);
        }
        if !extra.contains(&"--zookeeper") {
            args.extend(["--zookeeper".to_owned(), "0".to_owned()]);
        }
        // No PostgreSQL either unless asked for (initdb alone takes a second).
        if !extra.contains(&"--orders") && !extra.contains(&"--postgres-url") {
            args.extend(["--orders".to_owned(), "off".to_owned()]);
        }
        args.extend(extra.iter().map(|a| a.to_string()));
        let options = UpOptions {
            redis_url: redis_url.map(str::to_owned),
            args,
            binary: Some(env!("CARGO_BIN_EXE_stocklock").into()),
            echo: true,
            env: mutant
                .map(|m| (stocklock::chaos::mutant::VAR.to_owned(), m.to_owned()))
                .into_iter()
                .collect(),
        };
        let turn = stack_turn().await;
        let stack = stocklock::harness::stack::Stack::start(&options)
            .await
            .expect("stocklock up did not come up (see its output above)");
        assert_eq!(stack.instances.len(), instances as usize);
        if options
            .args
            .windows(2)
            .any(|pair| pair == ["--orders", "off"])
        {
            assert_eq!(stack.postgres, None, "--orders off started PostgreSQL");
        }
        Stack(stack, turn)
    }

    /// `POST /api/admin/reset` through nginx; the state after it.
    pub(crate) async fn reset(&self, sku: &str, stock: i64) -> StateSnapshot {
        self.client.reset(sku, stock, 0).await.expect("reset");
        self.state(sku).await
    }

    pub(crate) async fn state(&self, sku: &str) -> StateSnapshot {
        intact(self.client.state(sku).await.expect("state"))
    }

    /// Arms or performs a chaos action through nginx; its answer.
    pub(crate) async fn chaos(&self, action: Value) -> Value {
        self.client
            .chaos(&action)
            .await
            .unwrap_or_else(|err| panic!("{action}: {err:#}"))
    }

    /// The stack's HTTP client, for requests the typed client does not
    /// make (streams, metrics, requests without the token).
    pub(crate) fn http(&self) -> &reqwest::Client {
        self.client.http()
    }

    /// Sends SIGTERM to `up` and asserts it exits cleanly, leaving none of
    /// its children behind.
    pub(crate) async fn stop(self) {
        let mut children: Vec<u32> = self.instances.iter().map(|i| i.pid).collect();
        children.push(self.nginx_pid);
        children.extend(self.redis_pid);
        children.extend(self.etcd_members.iter().map(|m| m.pid));
        children.extend(self.zookeeper.iter().map(|server| server.pid));
        children.extend(self.replica.iter().chain(&self.relay).map(|node| node.pid));
        children.extend(self.sentinels.iter().map(|sentinel| sentinel.pid));
        children.extend(self.postgres.iter().map(|server| server.pid));
        let status = self.0.stop().await.expect("up did not stop within 20 s");
        assert!(status.success(), "up exited with {status}");
        for child in children {
            assert!(!alive(child), "up left pid {child} running");
        }
    }
}

/// Every state a test reads passes through here: a negative oversell is
/// stock gone without a recorded sale, the ledger itself broken, and fails
/// whatever test sees it (LEDGER_BROKEN).
pub(crate) fn intact(state: StateSnapshot) -> StateSnapshot {
    assert!(
        state.oversold >= 0,
        "LEDGER_BROKEN: oversold {} < 0: {state:?}",
        state.oversold
    );
    state
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

/// A tool a test needs is missing. Under `CI=true` (`.ci/run` sets it)
/// that fails the test: CI installs every tool, so a missing one is a
/// broken set-up, never a pass. Elsewhere the test says SKIPPED on stderr
/// (written to the handle itself: the harness captures `eprintln!`).
pub(crate) fn missing_tool(why: &str) {
    if std::env::var("CI").is_ok_and(|ci| ci == "true") {
        panic!("CI=true and {why}");
    }
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {why}");
}

/// `node --check FILE` (as an ES module when `module`): `false`, with a
/// visible note, when node is not installed (a failure under `CI=true`).
pub(crate) fn node_check(file: &std::path::Path, module: bool) -> bool {
    let Some(node) = stocklock::os::find_program("node") else {
        missing_tool(&format!(
            "node --check {}: node is not installed",
            file.display()
        ));
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

/// The SKU's current epoch (what a reset opened), read from its ledger.
pub(crate) async fn epoch<C: redis::aio::ConnectionLike>(
    conn: &mut C,
    keys: &stocklock::store::Keys,
) -> i64 {
    redis::cmd("HGET")
        .arg(&keys.ledger)
        .arg("epoch")
        .query_async(conn)
        .await
        .expect("the SKU's epoch")
}
