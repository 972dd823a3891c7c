//! `stocklock up`: the whole stack on one machine, supervised.
//!
//! Starts redis-server (unless `--redis-url` names one), N instances of this
//! same binary, and nginx in front of them, all on loopback and all as
//! children. It waits until everything answers, gives the lab's SKUs their
//! stock, prints the URL and the admin token, restarts an instance that dies,
//! and on Ctrl-C or SIGTERM stops every child and removes its files.
//!
//! Lines on stdout other programs can rely on (the tests do):
//!
//! ```text
//! redis: pid 123 redis://127.0.0.1:PORT          (again after every restart)
//! redis cluster: pids 1,2,3 redis://127.0.0.1:P1,redis://127.0.0.1:P2,...  (--cluster)
//! redlock node 1: pid 127 redis://127.0.0.1:PORT  (one line per node; --redlock N)
//! instance a: pid 124 http://127.0.0.1:PORT      (again after every restart)
//! nginx: pid 126 http://127.0.0.1:8080
//! stocklock is up: http://127.0.0.1:8080/
//! dashboard: http://127.0.0.1:8080/#token=TOKEN
//! admin token: TOKEN
//! ```

/// Prints a line on stdout for the user and for programs that read it;
/// a reader that went away is not a reason to crash the supervisor.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

pub mod nginx;
pub mod process;
pub mod redis;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::watch;
use tokio::task::JoinSet;

use self::nginx::Nginx;
use self::redis::RedisServer;
use crate::knobs::{DEFAULT_SKU, Sku};
use crate::ledger;
use crate::os::{free_port, shutdown_signal};
use crate::store::{Keys, Store};
use crate::variants::Variant;

/// What `up` was asked for.
#[derive(Clone, Debug)]
pub struct UpConfig {
    pub port: u16,
    pub host: String,
    pub instances: u16,
    pub redis_url: Option<String>,
    pub redis_port: Option<u16>,
    pub stock: i64,
    pub admin_token: String,
    pub default_variant: Variant,
    /// Run the instances in chaos mode.
    pub chaos: bool,
    /// Clock offsets of the instances, in order (chaos mode).
    pub clock_skew_ms: Vec<i64>,
    /// How many independent redis-servers to start for `redlock` (0: none).
    pub redlock: u16,
    /// Start a 3-master Redis Cluster instead of one redis-server.
    pub cluster: bool,
    /// Run our Redis with an append-only file fsynced before every reply,
    /// kept across its restarts: no acknowledged sale is lost to a crash.
    pub persist: bool,
    /// How long the instances remember request ids.
    pub request_ttl: Duration,
}

/// Masters of the cluster `up --cluster` starts.
pub const CLUSTER_MASTERS: usize = 3;

/// How long an instance may take to print its listening line.
const INSTANCE_READY: Duration = Duration::from_secs(15);

/// The instances' names: a, b, c, ...
fn instance_name(index: u16) -> String {
    char::from(b'a' + (index % 26) as u8).to_string()
}

/// Runs the stack until Ctrl-C or SIGTERM.
pub async fn run(config: UpConfig) -> anyhow::Result<()> {
    // Fail before starting anything if a piece is missing.
    process::require_program("nginx", "nginx-light")?;
    if config.redis_url.is_none() {
        process::require_program("redis-server", "redis-server")?;
    }
    let host: IpAddr = config
        .host
        .parse()
        .with_context(|| format!("--host {:?} is not an IP address", config.host))?;
    let listen = SocketAddr::new(host, config.port);
    let shown_host = if host.is_unspecified() {
        "127.0.0.1".to_owned()
    } else {
        host.to_string()
    };
    let public_url = format!("http://{shown_host}:{}", config.port);

    let run_dir = tempfile::Builder::new().prefix("stocklock-up-").tempdir()?;
    // nginx's workers run as another user when started by root; let them in.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(run_dir.path(), std::fs::Permissions::from_mode(0o755))?;
    }

    // A cluster, or one Redis (ours, supervised, or the user's).
    let mut cluster_nodes = Vec::new();
    if config.cluster {
        cluster_nodes = futures_util::future::try_join_all(
            (0..CLUSTER_MASTERS).map(|_| RedisServer::start_cluster_node()),
        )
        .await?;
        self::redis::create_cluster(&cluster_nodes).await?;
    }
    let cluster_urls: Vec<String> = cluster_nodes.iter().map(RedisServer::url).collect();
    if config.cluster {
        let pids: Vec<String> = cluster_nodes
            .iter()
            .map(|n| n.pid().unwrap_or(0).to_string())
            .collect();
        say!(
            "redis cluster: pids {} {}",
            pids.join(","),
            cluster_urls.join(",")
        );
    }
    // With --persist, its files live in our run directory, across restarts.
    let redis_data = config.persist.then(|| run_dir.path().join("redis-data"));
    let start_redis = |port: Option<u16>| {
        let dir = redis_data.clone();
        async move {
            match dir {
                Some(dir) => RedisServer::start_persistent(port, &dir).await,
                None => RedisServer::start(port).await,
            }
        }
    };
    let mut redis = match &config.redis_url {
        Some(_) => None,
        None if config.cluster => None,
        None => Some(start_redis(config.redis_port).await?),
    };
    let redis_url = match (&config.redis_url, &redis) {
        (Some(url), _) => url.clone(),
        (None, Some(server)) => {
            announce_redis(server);
            server.url()
        }
        (None, None) => cluster_urls.first().cloned().unwrap_or_default(),
    };
    // Redlock's nodes: independent, unsupervised (a node that dies stays
    // down, which is what the lab's Redlock scenarios are about).
    let mut redlock_nodes =
        futures_util::future::try_join_all((0..config.redlock).map(|_| RedisServer::start(None)))
            .await?;
    for (index, node) in redlock_nodes.iter().enumerate() {
        say!(
            "redlock node {}: pid {} {}",
            index + 1,
            node.pid().unwrap_or(0),
            node.url()
        );
    }
    let redlock_urls: Vec<String> = redlock_nodes.iter().map(RedisServer::url).collect();
    seed_stock(
        &Store::open_either(&redis_url, &cluster_urls)?,
        config.stock,
    )
    .await?;

    let (stop_tx, stop_rx) = watch::channel(false);
    let mut supervisors = JoinSet::new();
    let mut upstreams = Vec::new();
    for index in 0..config.instances {
        let spec = InstanceSpec {
            name: instance_name(index),
            addr: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), free_port()?),
            redis_url: redis_url.clone(),
            redis_cluster: cluster_urls.clone(),
            redlock_nodes: redlock_urls.clone(),
            request_ttl: config.request_ttl,
            admin_token: config.admin_token.clone(),
            default_variant: config.default_variant,
            public_url: public_url.clone(),
            chaos: config.chaos,
            owns_redis: config.redis_url.is_none() && !config.cluster,
            clock_skew_ms: config
                .clock_skew_ms
                .get(usize::from(index))
                .copied()
                .unwrap_or(0),
            binary: std::env::current_exe().context("cannot find this program's own path")?,
        };
        upstreams.push(spec.addr);
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        supervisors.spawn(supervise(spec, stop_rx.clone(), ready_tx));
        ready_rx
            .await
            .context("an instance's supervisor ended before the instance was ready")??;
    }

    let mut nginx = Nginx::start(run_dir.path(), listen, &upstreams).await?;
    say!("nginx: pid {} http://{listen}", nginx.pid().unwrap_or(0));
    say!("stocklock is up: {public_url}/");
    if config.chaos {
        say!(
            "chaos mode is ON (--no-chaos turns it off): /api/admin/chaos can crash, freeze and break the instances and Redis"
        );
    } else {
        say!("chaos mode is off");
    }
    say!("dashboard: {public_url}/#token={}", config.admin_token);
    say!("admin token: {}", config.admin_token);
    say!(
        "try: curl -s 'http://{shown_host}:{}/deductStock/lua?sku=lua'   (Ctrl-C stops everything)",
        config.port
    );

    // Run until asked to stop or nginx dies. Our Redis is restarted on its
    // port when it exits, as a managed Redis would be: empty, or with every
    // acknowledged write under --persist. Chaos mode's "restart Redis"
    // relies on it.
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    let ended_by = loop {
        tokio::select! {
            _ = &mut shutdown => break "a stop signal".to_owned(),
            status = nginx.child.wait() => break format!("nginx exiting ({status:?}):\n{}", nginx.log()),
            status = async {
                match redis.as_mut() {
                    Some(server) => server.exited().await,
                    None => std::future::pending().await,
                }
            } => {
                let Some(old) = redis.take() else { continue };
                tracing::warn!(?status, "redis-server exited; restarting it on port {}", old.port());
                let server = start_redis(Some(old.port())).await?;
                announce_redis(&server);
                redis = Some(server);
            }
        }
    };
    tracing::info!("stopping after {ended_by}");

    nginx.stop().await;
    let _ = stop_tx.send(true);
    while supervisors.join_next().await.is_some() {}
    if let Some(server) = redis.as_mut() {
        server.stop().await;
    }
    for node in cluster_nodes.iter_mut().chain(redlock_nodes.iter_mut()) {
        node.stop().await;
    }
    drop(run_dir);
    say!("stocklock stopped");
    Ok(())
}

/// `redis: pid N URL`, and where it persists when it does.
fn announce_redis(server: &RedisServer) {
    match server.persistent_dir() {
        Some(dir) => say!(
            "redis: pid {} {} (persistent: append-only file, fsync always, in {})",
            server.pid().unwrap_or(0),
            server.url(),
            dir.display()
        ),
        None => say!("redis: pid {} {}", server.pid().unwrap_or(0), server.url()),
    }
}

/// Gives the SKUs the lab uses (`00001` and one per variant) their stock,
/// leaving any that already have some alone (an existing Redis keeps its
/// state). `lua-sharded`'s SKU is split into [`crate::knobs::DEFAULT_BUCKETS`].
pub async fn seed_stock(store: &Store, stock: i64) -> anyhow::Result<()> {
    let mut conn = store.conn().await.context("cannot reach Redis")?;
    ledger::reset_sku(
        &mut conn,
        &Keys::new(&Sku::parse(DEFAULT_SKU)?),
        stock,
        0,
        true,
    )
    .await?;
    for variant in Variant::ALL {
        let sku = Sku::parse(variant.name())?;
        ledger::reset_sku(&mut conn, &Keys::new(&sku), stock, variant.buckets(), true).await?;
    }
    Ok(())
}

/// How to start one instance.
struct InstanceSpec {
    name: String,
    addr: SocketAddr,
    redis_url: String,
    redis_cluster: Vec<String>,
    redlock_nodes: Vec<String>,
    request_ttl: Duration,
    admin_token: String,
    default_variant: Variant,
    public_url: String,
    chaos: bool,
    /// `up` started (and restarts) the Redis: chaos may pause and restart it.
    owns_redis: bool,
    clock_skew_ms: i64,
    binary: PathBuf,
}

impl InstanceSpec {
    fn spawn(&self) -> std::io::Result<Child> {
        let mut command = Command::new(&self.binary);
        command
            .arg("serve")
            .arg("--listen")
            .arg(self.addr.to_string())
            .arg("--redis-url")
            .arg(&self.redis_url)
            .arg("--instance")
            .arg(&self.name)
            .arg("--default-variant")
            .arg(self.default_variant.name())
            .arg("--exit-with-stdin")
            .arg("--public-url")
            .arg(&self.public_url);
        if !self.redis_cluster.is_empty() {
            command.arg(format!("--redis-cluster={}", self.redis_cluster.join(",")));
        }
        if !self.redlock_nodes.is_empty() {
            command.arg(format!("--redlock-nodes={}", self.redlock_nodes.join(",")));
        }
        command.arg(format!("--request-ttl={}ms", self.request_ttl.as_millis()));
        if self.chaos {
            command
                .arg("--chaos")
                .arg(format!("--clock-skew-ms={}", self.clock_skew_ms));
            if self.owns_redis {
                command.arg("--chaos-redis");
            }
        }
        command
            .env("STOCKLOCK_ADMIN_TOKEN", &self.admin_token)
            // We keep the write end; if we die, the instance sees EOF and stops.
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
    }
}

/// Keeps one instance running: starts it, reports when it is first ready,
/// and restarts it whenever it dies, until `stop` turns true.
async fn supervise(
    spec: InstanceSpec,
    mut stop: watch::Receiver<bool>,
    ready: tokio::sync::oneshot::Sender<anyhow::Result<()>>,
) {
    let mut ready = Some(ready);
    let mut backoff = Duration::from_millis(100);
    loop {
        let started = tokio::time::Instant::now();
        let child = start_instance(&spec).await;
        let (mut child, _stdin) = match child {
            Ok(child) => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Ok(()));
                }
                child
            }
            Err(err) => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Err(err));
                    return;
                }
                tracing::error!(instance = %spec.name, "restart failed: {err:#}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        let stopped = tokio::select! {
            status = child.wait() => Err(status),
            _ = stop.wait_for(|stopped| *stopped) => Ok(()),
        };
        match stopped {
            Ok(()) => {
                process::stop(&mut child, Duration::from_secs(5)).await;
                return;
            }
            Err(status) => {
                if *stop.borrow() {
                    return;
                }
                tracing::warn!(instance = %spec.name, ?status, "instance died; restarting");
                // A process that dies right after starting would spin: back off.
                backoff = if started.elapsed() > Duration::from_secs(5) {
                    Duration::from_millis(100)
                } else {
                    (backoff * 2).min(Duration::from_secs(5))
                };
                tokio::time::sleep(backoff).await;
            }
        }
    }
}

/// Starts one instance and waits until it says it is ready (listening, and
/// subscribed to lock releases, so no early waiter misses a wake-up). The
/// instance stops when the returned stdin handle is dropped (`Child::wait`
/// would drop it if it stayed inside the child).
async fn start_instance(spec: &InstanceSpec) -> anyhow::Result<(Child, ChildStdin)> {
    let mut child = spec
        .spawn()
        .with_context(|| format!("cannot run {}", spec.binary.display()))?;
    let stdin = child.stdin.take().context("instance stdin")?;
    let stdout = child.stdout.take().context("instance stdout")?;
    let (output, ready) = process::watch_output(stdout, Some("is ready"), None);
    let what = format!("instance {}", spec.name);
    process::wait_ready(&mut child, ready, &output, &what, INSTANCE_READY).await?;
    say!(
        "instance {}: pid {} http://{}",
        spec.name,
        child.id().unwrap_or(0),
        spec.addr
    );
    Ok((child, stdin))
}
