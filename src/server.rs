//! `stocklock serve`: one instance, built and run.
//!
//! [`Application::build`] binds (port 0 is fine) and wires the state;
//! [`Application::run_until_stopped`] serves until Ctrl-C or SIGTERM and then
//! finishes the requests in flight.

use std::net::SocketAddr;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::http::{AppState, InstanceConfig, app_limited, limit};
use crate::lock::Wakeups;
use crate::os::shutdown_signal;
use crate::variants::Variant;

/// Everything one instance needs to know.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub redis_url: String,
    /// The name this instance reports (`a`, `b`, ... under `up`).
    pub instance: String,
    pub admin_token: String,
    pub default_variant: Variant,
    /// The stack's URL (nginx) for runs started from the page; `None`: this instance itself.
    pub public_url: Option<String>,
    pub chaos: crate::chaos::Chaos,
    /// A Redis Cluster to use instead of `redis_url` (any of its nodes).
    pub redis_cluster: Vec<String>,
    /// Sentinels (`host:port`) to find the master through instead of
    /// `redis_url` (empty: none).
    pub sentinel: Vec<String>,
    /// The master's name at the Sentinels.
    pub sentinel_master: String,
    /// The lock stores beside the main Redis (Redlock's nodes, etcd, ZooKeeper).
    pub lock_stores: crate::lock::LockStoresConfig,
    /// How long request ids are remembered for retries.
    pub request_ttl: std::time::Duration,
    /// How many request ids a SKU remembers at most.
    pub request_ids_per_sku: u64,
    /// How long a sold-out mark lives (zero: no marks).
    pub sold_out_mark_ttl: std::time::Duration,
    /// The order pipeline (`None`: orders off).
    pub orders: Option<crate::orders::OrdersConfig>,
    /// Each client's budget on the public routes that do work (`None`: no limit).
    pub rate_limit: Option<limit::Rate>,
    /// Serve the bench's bare baseline, `GET /bench/bare`.
    pub bench_bare: bool,
    /// The most buyers of a SKU `lua-batch` sends in one call.
    pub batch_max: usize,
}

/// A bound, not yet serving, instance.
pub struct Application {
    listener: TcpListener,
    state: AppState,
    rate_limit: Option<limit::Rate>,
    /// Release listener, heartbeat, board reader: stopped with the server.
    background: Vec<tokio::task::JoinHandle<()>>,
}

impl Application {
    /// Binds the listener and starts the release listener. Redis need not be
    /// up yet: requests answer 503 until it is.
    pub async fn build(config: ServeConfig) -> anyhow::Result<Self> {
        let store = crate::store::open_any(
            &config.redis_url,
            &config.redis_cluster,
            &config.sentinel,
            &config.sentinel_master,
        )
        .with_context(|| {
            format!(
                "bad Redis URL {:?}, cluster {:?} or Sentinels {:?}",
                config.redis_url, config.redis_cluster, config.sentinel
            )
        })?;
        crate::lock::LockStores::open(&config.lock_stores)?;
        let wakeups = Wakeups::new().also_hearing(crate::sale::CHANNELS);
        let listener_task = wakeups.follow(store.clone());
        let listener = TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        let local = listener.local_addr()?;
        let rate_limit = config.rate_limit;
        let state = AppState::new(
            store,
            InstanceConfig {
                instance: config.instance,
                admin_token: config.admin_token,
                default_variant: config.default_variant,
                public_url: config
                    .public_url
                    .unwrap_or_else(|| format!("http://{local}")),
                chaos: config.chaos,
                own_url: format!("http://{local}"),
                lock_stores: config.lock_stores,
                request_ttl: config.request_ttl,
                request_ids_per_sku: config.request_ids_per_sku,
                sold_out_mark_ttl: config.sold_out_mark_ttl,
                orders: config.orders,
                bench_bare: config.bench_bare,
                batch_max: config.batch_max,
            },
            wakeups,
        );
        let mut background = state.start_background();
        background.push(listener_task);
        Ok(Self {
            listener,
            state,
            rate_limit,
            background,
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Resolves once the instance is ready: its subscription to lock
    /// releases is live, so no waiter sleeps out a lease for want of a
    /// wake-up. Until then `/healthz` answers 503 `starting`.
    pub fn ready(&self) -> impl Future<Output = ()> + use<> {
        let wakeups = self.state.wakeups().clone();
        async move { wakeups.subscribed().await }
    }

    /// Serves until Ctrl-C or SIGTERM, then drains the requests in flight.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.run_until(shutdown_signal()).await
    }

    /// Serves until `stop` resolves, then drains the requests in flight.
    pub async fn run_until(
        self,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        // The peer's address: the rate limit's client, or nginx's.
        let app = app_limited(self.state, self.rate_limit)
            .into_make_service_with_connect_info::<SocketAddr>();
        let served = axum::serve(self.listener, app)
            .with_graceful_shutdown(stop)
            .await;
        for task in &self.background {
            task.abort();
        }
        served
    }
}

/// Resolves when standard input reaches its end: `up` holds the other end
/// of that pipe, so an instance never outlives its supervisor, even one
/// killed with SIGKILL.
pub async fn stdin_closed() {
    use tokio::io::AsyncReadExt;
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 64];
    while matches!(stdin.read(&mut buf).await, Ok(n) if n > 0) {}
}
