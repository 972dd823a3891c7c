//! The HTTP layer: extract and validate, call the domain, map the outcome.
//!
//! [`app`] builds the whole router from an [`AppState`], so tests can drive it
//! with `tower::ServiceExt::oneshot` without a socket. One module per
//! concern: `deduct` sells, `admin` resets and runs chaos actions,
//! `info` answers state, variants and health, `bench` serves the bench's
//! bare baseline when started for it; the dashboard's routes are
//! its own ([`dashboard::router`]), merged here. The public routes that do
//! work (deduct, timeline, orders) sit behind a per-client rate limit
//! (`limit`), which [`app_limited`] turns on. Every error leaves as JSON
//! `{error, detail}` through [`AppError`]; sold out and busy are not errors
//! but outcomes, with their own status codes.

mod admin;
mod bench;
mod deduct;
mod info;
pub mod limit;
pub mod orders;
mod timeline;

use std::sync::Arc;

use axum::Router;
use axum::http::HeaderMap;
use axum::middleware;
use axum::routing::{get, post};
use tower_http::trace::TraceLayer;

use crate::chaos::Chaos;
use crate::dashboard::{self, Dashboard};
use crate::lock::Wakeups;
use crate::sale::Seller;
use crate::store::Store;
use crate::up::pg_relay::PgRelay;
use crate::variants::Variant;
use crate::web::{AdminToken, AppError};

/// What every handler shares. Cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

struct Shared {
    store: Store,
    config: InstanceConfig,
    /// The domain: every sale goes through it.
    seller: Arc<Seller>,
    admin: AdminToken,
    /// The page's state: handed what it shows, it reads nothing of ours.
    dashboard: Dashboard,
    /// The orders' database (`None`: orders off).
    orders: Option<crate::orders::Database>,
    /// Chaos mode: the relay the stock's PostgreSQL is reached through.
    pg_relay: Option<Arc<PgRelay>>,
}

/// Who this instance is and how it is reached.
#[derive(Clone, Debug)]
pub struct InstanceConfig {
    /// The name reported in every answer (`a`, `b`, ... under `up`).
    pub instance: String,
    /// Bearer token of `/api/admin/*`.
    pub admin_token: String,
    /// The variant of `GET /deductStock`.
    pub default_variant: Variant,
    /// The stack's URL (nginx), where runs started from the page send their load.
    pub public_url: String,
    /// Chaos mode (off unless `serve --chaos`).
    pub chaos: Chaos,
    /// This instance's own address, announced in its heartbeat.
    pub own_url: String,
    /// The lock stores beside the main Redis (a variant whose store is
    /// missing answers 503 and says how to get one).
    pub lock_stores: crate::lock::LockStoresConfig,
    /// How long request ids are remembered for retries.
    pub request_ttl: std::time::Duration,
    /// How many request ids a SKU remembers at most.
    pub request_ids_per_sku: u64,
    /// How long a sold-out mark lives (zero: no marks).
    pub sold_out_mark_ttl: std::time::Duration,
    /// The order pipeline (`None`: orders off).
    pub orders: Option<crate::orders::OrdersConfig>,
    /// Serve the bench's bare baseline, `GET /bench/bare` (`serve
    /// --bench-bare`; off: that route is 404).
    pub bench_bare: bool,
    /// The most buyers of a SKU `lua-batch` sends in one call (`serve --batch-max`).
    pub batch_max: usize,
}

impl AppState {
    /// The state of one instance. `wakeups` must be fed by a listener
    /// ([`Wakeups::listen`]) for waiters to be woken by releases; without one
    /// they still re-check when the holder's lease runs out. The board feed
    /// and the heartbeat are started by [`AppState::start_background`].
    pub fn new(store: Store, config: InstanceConfig, wakeups: Wakeups) -> Self {
        let metrics = crate::metrics::install(&config.instance);
        crate::metrics::start_at_zero(
            &Variant::ALL.map(Variant::name),
            &Variant::ALL
                .into_iter()
                .filter(|v| v.takes_lock())
                .map(Variant::name)
                .collect::<Vec<_>>(),
        );
        // The URLs were checked at start-up (`serve`); a bad one here means none.
        let mut stores = crate::lock::LockStores::open(&config.lock_stores).unwrap_or_default();
        // The orders' PostgreSQL keeps the pg-* variants' stock too; in
        // chaos mode their connections go through a relay of the
        // instance's own, which can lose a commit's answer.
        let mut pg_relay = None;
        if let Some(orders) = &config.orders {
            let mut url = orders.postgres_url.clone();
            if config.chaos.enabled() {
                match PgRelay::in_front_of(&url) {
                    Ok((relay, through)) => {
                        pg_relay = Some(Arc::new(relay));
                        url = through;
                    }
                    Err(err) => tracing::warn!("no relay to PostgreSQL: {err:#}"),
                }
            }
            match crate::pgstock::pool(&url, crate::pgstock::POOL_SIZE) {
                Ok(pool) => stores.postgres = Some(pool),
                Err(err) => tracing::warn!("the pg-* variants are off: {err:#}"),
            }
        }
        let seller = Seller::new(
            store.clone(),
            config.instance.clone(),
            config.chaos.clone(),
            wakeups,
            stores,
        )
        .with_request_ttl(config.request_ttl, config.request_ids_per_sku)
        .with_mark_ttl(config.sold_out_mark_ttl)
        .with_batch_max(config.batch_max);
        let admin = AdminToken::new(&config.admin_token);
        let dashboard = Dashboard::new(dashboard::Parts {
            store: store.clone(),
            instance: config.instance.clone(),
            own_url: config.own_url.clone(),
            public_url: config.public_url.clone(),
            admin: admin.clone(),
            wakeups: seller.wakeups().clone(),
            stores: seller.stores().clone(),
            requests: seller.requests(),
            metrics,
            chaos: config.chaos.enabled(),
            orders: config.orders.is_some(),
        });
        let orders = config.orders.clone().map(crate::orders::Database::new);
        Self(Arc::new(Shared {
            pg_relay,
            orders,
            store,
            config,
            seller: Arc::new(seller),
            admin,
            dashboard,
        }))
    }

    /// Starts the tasks that keep the dashboard live (the heartbeat and the
    /// board reader) and the ledger's count of unknown answers. They stop
    /// when the returned handles are aborted.
    pub fn start_background(&self) -> Vec<tokio::task::JoinHandle<()>> {
        let mut tasks = self.0.dashboard.start_background();
        tasks.push(self.0.seller.keep_counting_local());
        tasks.push(self.0.seller.listen_to_announcements());
        if let Some(orders) = &self.0.config.orders {
            tasks.push(tokio::spawn(crate::orders::worker::run(
                self.0.store.clone(),
                orders.clone(),
                self.0.config.instance.clone(),
                self.0.config.chaos.clone(),
            )));
            tasks.push(tokio::spawn(crate::orders::expiry::run(
                self.0.store.clone(),
                orders.postgres_url.clone(),
                orders.expiry_every(),
                crate::gate::Gates::of(&self.0.config.chaos, &self.0.store),
            )));
        }
        tasks
    }

    /// The orders' database, when orders are on.
    pub fn orders(&self) -> Option<&crate::orders::Database> {
        self.0.orders.as_ref()
    }

    pub fn store(&self) -> &Store {
        &self.0.store
    }

    pub fn seller(&self) -> &Arc<Seller> {
        &self.0.seller
    }

    pub fn instance(&self) -> &str {
        &self.0.config.instance
    }

    /// The variant of `GET /deductStock`.
    pub fn default_variant(&self) -> Variant {
        self.0.config.default_variant
    }

    pub fn chaos(&self) -> &Chaos {
        &self.0.config.chaos
    }

    /// The relay to the stock's PostgreSQL (chaos mode, with PostgreSQL).
    pub fn pg_relay(&self) -> Option<&PgRelay> {
        self.0.pg_relay.as_deref()
    }

    pub fn wakeups(&self) -> &Wakeups {
        self.0.seller.wakeups()
    }

    pub fn dashboard(&self) -> &Dashboard {
        &self.0.dashboard
    }

    /// Lets an admin request in, or refuses it (401).
    pub fn authorize(&self, headers: &HeaderMap) -> Result<(), AppError> {
        self.0.admin.authorize(headers)
    }
}

/// The whole router of one instance: the API's routes and the dashboard's,
/// with no rate limit.
pub fn app(state: AppState) -> Router {
    app_limited(state, None)
}

/// [`app`] with the public routes that do work limited to `rate` per
/// client (`None`: no limit). The limit needs the peer's address: serve
/// with `into_make_service_with_connect_info::<SocketAddr>()`.
pub fn app_limited(state: AppState, rate: Option<limit::Rate>) -> Router {
    let dashboard = dashboard::router(state.dashboard().clone());
    let limit = limit::RateLimit::new(rate, AdminToken::new(&state.0.config.admin_token));
    let limited = Router::new()
        .route(
            "/deductStock",
            get(deduct::deduct_default).post(deduct::deduct_default),
        )
        .route(
            "/deductStock/{variant}",
            get(deduct::deduct).post(deduct::deduct),
        )
        .route("/api/orders", get(orders::view))
        .route("/api/orders/find", get(orders::find))
        .route("/api/orders/{id}/pay", post(orders::pay))
        .route("/api/timeline", get(timeline::view))
        .route("/api/timeline/export", get(timeline::export));
    // No limit, no layer: a request pays nothing for a limiter it has not got.
    let limited = if limit.is_on() {
        limited.route_layer(middleware::from_fn_with_state(limit, limit::enforce))
    } else {
        limited
    };
    // The bench's floor: outside the rate limit, and only when asked for.
    let bare = if state.0.config.bench_bare {
        Router::new().route("/bench/bare", get(bench::bare))
    } else {
        Router::new()
    };
    Router::new()
        .merge(limited)
        .merge(bare)
        .route("/api/state", get(info::state_of))
        .route("/api/variants", get(info::variants))
        .route("/api/admin/reset", post(admin::reset))
        .route("/api/admin/chaos", post(admin::chaos_action))
        .route("/api/admin/orders/expire", post(orders::expire))
        .route("/healthz", get(info::healthz))
        .with_state(state)
        .merge(dashboard)
        // After the merge: the method fallback and the layer apply to the
        // routes registered so far, the dashboard's included.
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(TraceLayer::new_for_http())
}

/// A query string as name/value pairs, in order and with repeats, so that
/// an unknown or repeated parameter can be refused by name.
type Pairs = Vec<(String, String)>;

async fn not_found(uri: axum::http::Uri) -> AppError {
    AppError::NotFound(uri.path().to_owned())
}

async fn method_not_allowed() -> AppError {
    AppError::MethodNotAllowed
}
