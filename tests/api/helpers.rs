//! Test fixtures: a real redis-server, a real `stocklock up` stack, one
//! instance driven in-process ([`InProcess`]), and a small concurrent client. Every process a test starts is stopped by pid
//! when its fixture is dropped.

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
use stocklock::http::{AppState, InstanceConfig, app};
use stocklock::lab::stack::UpOptions;
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

/// A `stocklock up` stack run as a child process, the way a user runs it:
/// the lab's own harness ([`stocklock::lab::stack::Stack`], reached through
/// `Deref`), with answers unwrapped and a stop that checks nothing is left.
pub(crate) struct Stack(stocklock::lab::stack::Stack);

impl std::ops::Deref for Stack {
    type Target = stocklock::lab::stack::Stack;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Stack {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
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
        let mut args = vec!["--instances".to_owned(), instances.to_string()];
        args.extend(extra.iter().map(|a| a.to_string()));
        let options = UpOptions {
            redis_url: redis_url.map(str::to_owned),
            args,
            binary: Some(env!("CARGO_BIN_EXE_stocklock").into()),
            echo: true,
        };
        let stack = stocklock::lab::stack::Stack::start(&options)
            .await
            .expect("stocklock up did not come up (see its output above)");
        assert_eq!(stack.instances.len(), instances as usize);
        Stack(stack)
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

/// The admin token of the in-process routers.
pub(crate) const ADMIN_TOKEN: &str = "test-token";

/// One instance's router, driven in-process with `oneshot` (no socket), on
/// a real Redis: the one way the tests call an instance without a stack.
#[derive(Clone)]
pub(crate) struct InProcess(pub(crate) axum::Router);

impl InProcess {
    /// An instance named `instance` on `store`, its release listener
    /// subscribed as in a real instance, its Redlock "nodes" the store's
    /// other databases ([`redlock_on`]).
    pub(crate) async fn start(store: &Store, instance: &str, chaos: Chaos) -> InProcess {
        let wakeups = Wakeups::new();
        // Lives as long as the test's runtime.
        let _listener = wakeups.listen(store.client().clone());
        wakeups.subscribed().await;
        InProcess::with(
            store,
            wakeups,
            InstanceConfig {
                instance: instance.to_owned(),
                admin_token: ADMIN_TOKEN.to_owned(),
                default_variant: Variant::Lua,
                public_url: "http://127.0.0.1:9".to_owned(),
                own_url: "http://127.0.0.1:9".to_owned(),
                chaos,
                redlock_nodes: redlock_on(store),
                request_ttl: stocklock::ledger::DEFAULT_REQUEST_TTL,
            },
        )
    }

    /// An instance configured as `config` says (e.g. without Redlock nodes).
    pub(crate) fn with(store: &Store, wakeups: Wakeups, config: InstanceConfig) -> InProcess {
        InProcess(app(AppState::new(store.clone(), config, wakeups)))
    }

    /// Sends `request`; the answer as it came.
    pub(crate) async fn send(&self, request: Request<Body>) -> Response<Body> {
        self.0.clone().oneshot(request).await.unwrap()
    }

    /// Sends `request`; the status and the JSON body, which every answer
    /// of the API has (the test fails if it has not).
    pub(crate) async fn call(&self, request: Request<Body>) -> (StatusCode, Value) {
        let response = self.send(request).await;
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| panic!("not JSON ({status}): {}", String::from_utf8_lossy(&bytes)));
        (status, body)
    }

    /// `GET uri`: the status and the JSON body.
    pub(crate) async fn get(&self, uri: &str) -> (StatusCode, Value) {
        self.call(Request::get(uri).body(Body::empty()).unwrap())
            .await
    }

    /// `GET uri` of a page: the status, the content type and the text.
    pub(crate) async fn page(&self, uri: &str) -> (StatusCode, String, String) {
        let response = self
            .send(Request::get(uri).body(Body::empty()).unwrap())
            .await;
        let status = response.status();
        let content_type = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_owned();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            content_type,
            String::from_utf8(body.to_vec()).unwrap(),
        )
    }

    /// `POST /api/admin/reset` with `body` (a JSON text, sent as is) and
    /// the `authorization` header `auth`, if any.
    pub(crate) async fn reset_with(&self, body: &str, auth: Option<&str>) -> (StatusCode, Value) {
        let mut request =
            Request::post("/api/admin/reset").header("content-type", "application/json");
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        self.call(request.body(Body::from(body.to_owned())).unwrap())
            .await
    }

    /// Gives `sku` `stock` units over `buckets` buckets (0: one key); the
    /// reset must succeed.
    pub(crate) async fn reset(&self, sku: &str, stock: i64, buckets: u32) {
        let body = serde_json::json!({"sku": sku, "stock": stock, "buckets": buckets});
        let (status, answer) = self
            .reset_with(&body.to_string(), Some(&format!("Bearer {ADMIN_TOKEN}")))
            .await;
        assert_eq!(status, 200, "{answer}");
    }

    /// `GET /api/state?sku=`, which must succeed, through [`intact`].
    pub(crate) async fn state(&self, sku: &str) -> StateSnapshot {
        let (status, body) = self.get(&format!("/api/state?sku={sku}")).await;
        assert_eq!(status, 200, "{body}");
        intact(serde_json::from_value(body).unwrap())
    }
}

/// Five Redlock "nodes" for in-process routers: five databases of the one
/// test Redis, independent key spaces. Enough to run `redlock` like every
/// other variant; the tests of Redlock itself use five real servers.
pub(crate) fn redlock_on(store: &Store) -> Vec<String> {
    let addr = store.client().get_connection_info().addr().to_string();
    (1..=5).map(|db| format!("redis://{addr}/{db}")).collect()
}

/// Keyspace events on `key` (hash commands: HINCRBY, ...), as a stream:
/// how a test learns, without polling, that a lock was just taken.
pub(crate) async fn keyspace_events(
    redis_url: &str,
    key: &str,
) -> impl futures_util::Stream<Item = redis::Msg> + use<> {
    let client = redis::Client::open(redis_url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("Kh")
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut events = client.get_async_pubsub().await.unwrap();
    events
        .subscribe(format!("__keyspace@0__:{key}"))
        .await
        .unwrap();
    events.into_on_message()
}

/// Announcements that a critical section of one of `skus` has read the
/// stock (chaos mode: the section is in its gap), as a stream of SKU names:
/// how a test strikes inside the gap without guessing a delay.
pub(crate) async fn sections_entered(
    redis_url: &str,
    skus: &[&str],
) -> impl futures_util::Stream<Item = String> + use<> {
    use futures_util::StreamExt;
    let client = redis::Client::open(redis_url).unwrap();
    let mut events = client.get_async_pubsub().await.unwrap();
    for sku in skus {
        let keys = stocklock::store::Keys::new(&stocklock::knobs::Sku::parse(sku).unwrap());
        events
            .subscribe(stocklock::chaos::section_channel(&keys))
            .await
            .unwrap();
    }
    events.into_on_message().map(|msg| {
        // stocklock:section:stock:{SKU}
        let channel = msg.get_channel_name().to_owned();
        channel
            .rsplit_once('{')
            .map(|(_, rest)| rest.trim_end_matches('}').to_owned())
            .unwrap_or(channel)
    })
}

/// A SKU's request id records (`requests:{sku}`): id → record.
pub(crate) async fn request_records(redis_url: &str, sku: &str) -> BTreeMap<String, String> {
    let client = redis::Client::open(redis_url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("HGETALL")
        .arg(format!("requests:{{{sku}}}"))
        .query_async(&mut conn)
        .await
        .unwrap()
}
