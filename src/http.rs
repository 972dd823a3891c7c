//! The HTTP layer: extract and validate, call the domain, map the outcome.
//!
//! [`app`] builds the whole router from an [`AppState`], so tests can drive it
//! with `tower::ServiceExt::oneshot` without a socket. Every error leaves as
//! JSON `{error, detail}` through [`AppError`]; sold out and busy are not
//! errors but outcomes, with their own status codes.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use metrics_exporter_prometheus::PrometheusHandle;
use subtle::ConstantTimeEq;
use tower_http::trace::TraceLayer;

use crate::chaos::{self, Chaos};
use crate::dashboard::{self, BoardFeed};
use crate::knobs::{DeductRequest, InputError, Sku, parse_stock};
use crate::ledger;
use crate::lock::Wakeups;
use crate::sale::{Sale, SaleError, Seller};
use crate::section::Outcome;
use crate::store::{Keys, Store, StoreError};
use crate::variants::Variant;
use crate::wire::{
    ChaosAction, DeductResponse, ErrorBody, Health, OutcomeKind, ResetRequest, StateSnapshot,
    VariantInfo,
};

/// What every handler shares. Cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

struct Shared {
    store: Store,
    config: InstanceConfig,
    /// The domain: every sale goes through it.
    seller: Arc<Seller>,
    board: BoardFeed,
    metrics: &'static PrometheusHandle,
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
    /// The independent Redis servers of the `redlock` variant (none: it
    /// answers 503 and says how to get some).
    pub redlock_nodes: Vec<String>,
    /// How long request ids are remembered for retries.
    pub request_ttl: std::time::Duration,
}

impl AppState {
    /// The state of one instance. `wakeups` must be fed by a listener
    /// ([`Wakeups::listen`]) for waiters to be woken by releases; without one
    /// they still re-check when the holder's lease runs out. The board feed
    /// and the heartbeat are started by [`AppState::start_background`].
    pub fn new(store: Store, config: InstanceConfig, wakeups: Wakeups) -> Self {
        let metrics = crate::metrics::install(&config.instance);
        // The URLs were checked at start-up (`serve`); a bad one here means none.
        let redlock = crate::lock::RedlockNodes::open(&config.redlock_nodes)
            .ok()
            .filter(|nodes| !nodes.is_empty());
        let seller = Seller::new(
            store.clone(),
            config.instance.clone(),
            config.chaos.clone(),
            wakeups,
            redlock,
        )
        .with_request_ttl(config.request_ttl);
        Self(Arc::new(Shared {
            store,
            config,
            seller: Arc::new(seller),
            board: BoardFeed::default(),
            metrics,
        }))
    }

    /// Starts the tasks that keep the dashboard live (the heartbeat and the
    /// board reader) and the ledger's count of unknown answers. They stop
    /// when the returned handles are aborted.
    pub fn start_background(&self) -> Vec<tokio::task::JoinHandle<()>> {
        vec![
            dashboard::heartbeat(
                self.0.store.clone(),
                self.0.config.instance.clone(),
                self.0.config.own_url.clone(),
                self.0.seller.requests(),
            ),
            self.0
                .board
                .run(self.0.store.clone(), self.0.seller.redlock().cloned()),
            self.0.seller.keep_counting_unknown(),
        ]
    }

    pub fn store(&self) -> &Store {
        &self.0.store
    }

    /// The Redlock nodes, if this instance has any.
    pub fn redlock(&self) -> Option<&crate::lock::RedlockNodes> {
        self.0.seller.redlock()
    }

    pub fn instance(&self) -> &str {
        &self.0.config.instance
    }

    pub fn admin_token(&self) -> &str {
        &self.0.config.admin_token
    }

    pub fn public_url(&self) -> &str {
        &self.0.config.public_url
    }

    pub fn wakeups(&self) -> &Wakeups {
        self.0.seller.wakeups()
    }

    pub fn seller(&self) -> &Arc<Seller> {
        &self.0.seller
    }

    pub fn board_feed(&self) -> &BoardFeed {
        &self.0.board
    }

    pub fn metrics(&self) -> &PrometheusHandle {
        self.0.metrics
    }

    /// Accepts `Authorization: Bearer <token>` when it equals the admin token,
    /// comparing in constant time so the token cannot be guessed byte by byte.
    pub fn authorize(&self, headers: &HeaderMap) -> Result<(), AppError> {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        let expected = self.0.config.admin_token.as_bytes();
        if !expected.is_empty() && bool::from(given.as_bytes().ct_eq(expected)) {
            Ok(())
        } else {
            Err(AppError::Unauthorized)
        }
    }
}

/// The whole router of one instance.
pub fn app(state: AppState) -> Router {
    Router::new()
        .route("/", get(dashboard::index))
        .route("/static/app.js", get(dashboard::app_js))
        .route("/static/style.css", get(dashboard::style_css))
        .route("/deductStock", get(deduct_default).post(deduct_default))
        .route("/deductStock/{variant}", get(deduct).post(deduct))
        .route("/api/state", get(state_of))
        .route("/api/board", get(dashboard::board))
        .route("/api/events", get(dashboard::events))
        .route("/api/variants", get(variants))
        .route("/api/admin/reset", post(reset))
        .route("/api/admin/run", post(dashboard::runs::start))
        .route("/api/admin/chaos", post(chaos_action))
        .route("/api/admin/lab", post(dashboard::labs::start))
        .route("/metrics", get(dashboard::metrics))
        .route("/healthz", get(healthz))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// Every way a request can fail. Each maps to one status and a JSON body.
#[derive(Debug)]
pub enum AppError {
    /// 400: a field was refused.
    Invalid(InputError),
    /// 400: the query string or body could not even be read.
    Malformed(String),
    /// 404: no such variant.
    UnknownVariant(String),
    /// 404: the SKU was never stocked.
    UnknownSku(Sku),
    /// 404: no such route.
    NotFound(String),
    /// 405
    MethodNotAllowed,
    /// 401: missing or wrong admin token.
    Unauthorized,
    /// 409: the action conflicts with one under way.
    Conflict(String),
    /// 403: not allowed on this instance (chaos without chaos mode).
    Forbidden(String),
    /// 503: Redis is away; the request decided nothing.
    Unavailable(StoreError),
    /// 503: this instance was not given what the request needs (Redlock's nodes).
    NotConfigured(String),
    /// 500: a bug of ours (a panicked task). Never caused by input.
    Internal(String),
}

impl From<InputError> for AppError {
    fn from(err: InputError) -> Self {
        AppError::Invalid(err)
    }
}

impl From<SaleError> for AppError {
    fn from(err: SaleError) -> Self {
        match err {
            SaleError::NotConfigured(detail) => AppError::NotConfigured(detail.to_owned()),
            SaleError::Unavailable(err) => AppError::Unavailable(err),
            SaleError::Panicked(detail) => AppError::Internal(detail),
        }
    }
}

impl From<StoreError> for AppError {
    fn from(err: StoreError) -> Self {
        AppError::Unavailable(err)
    }
}

impl From<QueryRejection> for AppError {
    fn from(err: QueryRejection) -> Self {
        AppError::Malformed(format!("query string: {}", err.body_text()))
    }
}

impl From<PathRejection> for AppError {
    fn from(err: PathRejection) -> Self {
        AppError::Malformed(format!("path: {}", err.body_text()))
    }
}

impl From<JsonRejection> for AppError {
    fn from(err: JsonRejection) -> Self {
        AppError::Malformed(format!("body: {}", err.body_text()))
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let (status, error, detail, valid) = match self {
            AppError::Invalid(err) => (
                StatusCode::BAD_REQUEST,
                "invalid_input",
                err.to_string(),
                None,
            ),
            AppError::Malformed(detail) => (StatusCode::BAD_REQUEST, "invalid_input", detail, None),
            AppError::UnknownVariant(name) => (
                StatusCode::NOT_FOUND,
                "unknown_variant",
                format!(
                    "no variant named {:?}; valid: {}",
                    name.chars().take(40).collect::<String>(),
                    Variant::names().join(", ")
                ),
                Some(Variant::names()),
            ),
            AppError::UnknownSku(sku) => (
                StatusCode::NOT_FOUND,
                "unknown_sku",
                format!(
                    "SKU {:?} was never stocked (or its Redis lost it): POST /api/admin/reset gives it stock",
                    sku.as_str()
                ),
                None,
            ),
            AppError::NotFound(path) => (
                StatusCode::NOT_FOUND,
                "not_found",
                format!(
                    "no route {:?}; see /deductStock/{{variant}}, /api/state, /api/variants, /healthz",
                    path.chars().take(80).collect::<String>()
                ),
                None,
            ),
            AppError::MethodNotAllowed => (
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this route does not take that method".to_owned(),
                None,
            ),
            AppError::Unauthorized => (
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "send the admin token as 'Authorization: Bearer <token>' (printed by stocklock up)"
                    .to_owned(),
                None,
            ),
            AppError::Conflict(detail) => (StatusCode::CONFLICT, "conflict", detail, None),
            AppError::Forbidden(detail) => (StatusCode::FORBIDDEN, "forbidden", detail, None),
            AppError::NotConfigured(detail) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "not_configured",
                detail,
                None,
            ),
            AppError::Unavailable(err) => {
                tracing::warn!(%err, "store unavailable");
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "store_unavailable",
                    format!("Redis is unavailable; nothing was sold: {err}"),
                    None,
                )
            }
            AppError::Internal(detail) => {
                tracing::error!(%detail, "internal error");
                (StatusCode::INTERNAL_SERVER_ERROR, "internal", detail, None)
            }
        };
        let body = ErrorBody {
            error: error.to_owned(),
            detail,
            valid,
        };
        (status, Json(body)).into_response()
    }
}

type Pairs = Vec<(String, String)>;

async fn deduct(
    State(state): State<AppState>,
    variant: Result<Path<String>, PathRejection>,
    query: Result<Query<Pairs>, QueryRejection>,
) -> Result<Response, AppError> {
    let Path(name) = variant?;
    let variant: Variant = name.parse().map_err(|_| AppError::UnknownVariant(name))?;
    run_deduct(state, variant, query?.0).await
}

async fn deduct_default(
    State(state): State<AppState>,
    query: Result<Query<Pairs>, QueryRejection>,
) -> Result<Response, AppError> {
    let variant = state.0.config.default_variant;
    run_deduct(state, variant, query?.0).await
}

async fn run_deduct(state: AppState, variant: Variant, pairs: Pairs) -> Result<Response, AppError> {
    let request = DeductRequest::parse(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))?;
    let sale = state.0.seller.sell(variant, request).await?;
    Ok(sale_response(sale, &state.0.config.instance))
}

/// The status and body of a sale's answer.
fn sale_response(sale: Sale, instance: &str) -> Response {
    let (status, kind, unit, remaining, reason) = match sale.outcome {
        Outcome::Sold { unit, remaining } => (
            StatusCode::OK,
            OutcomeKind::Sold,
            Some(unit),
            Some(remaining),
            None,
        ),
        Outcome::SoldOut { remaining } => (
            StatusCode::CONFLICT,
            OutcomeKind::SoldOut,
            None,
            Some(remaining),
            None,
        ),
        Outcome::Busy(reason) => (
            StatusCode::TOO_MANY_REQUESTS,
            OutcomeKind::Busy,
            None,
            None,
            Some(reason.as_str().to_owned()),
        ),
        Outcome::Unknown => (
            StatusCode::SERVICE_UNAVAILABLE,
            OutcomeKind::Unknown,
            None,
            None,
            None,
        ),
        Outcome::NotStocked => return AppError::UnknownSku(sale.sku).into_response(),
    };
    let detail = (kind == OutcomeKind::Unknown).then(|| {
        match &sale.request_id {
            Some(_) => "the write was sent and no answer came: it may or may not have happened; retry with the same request_id to learn which".to_owned(),
            None => "the write was sent and no answer came: it may or may not have happened; only the ledger can tell (send a request_id to be able to ask)".to_owned(),
        }
    });
    let body = DeductResponse {
        outcome: kind,
        variant: sale.variant.name().to_owned(),
        sku: sale.sku.to_string(),
        unit,
        remaining,
        instance: instance.to_owned(),
        reason,
        replayed: sale.replayed,
        request_id: sale.request_id,
        detail,
    };
    (status, Json(body)).into_response()
}

/// Reads `?sku=` (the only parameter) of the state endpoint.
fn sku_only(pairs: &Pairs) -> Result<Sku, AppError> {
    let mut sku = None;
    for (name, value) in pairs {
        match name.as_str() {
            "sku" if sku.is_none() => sku = Some(Sku::parse(value)?),
            "sku" => return Err(InputError::new("sku", "given more than once").into()),
            other => {
                return Err(
                    InputError::new(format!("{other:?}"), "unknown parameter; known: sku").into(),
                );
            }
        }
    }
    Ok(sku.unwrap_or_default())
}

async fn state_of(
    State(state): State<AppState>,
    query: Result<Query<Pairs>, QueryRejection>,
) -> Result<Json<StateSnapshot>, AppError> {
    let sku = sku_only(&query?.0)?;
    let mut conn = state.0.store.conn().await?;
    Ok(Json(
        ledger::snapshot(&mut conn, &Keys::new(&sku), sku.as_str()).await?,
    ))
}

async fn variants() -> Json<Vec<VariantInfo>> {
    Json(Variant::ALL.iter().map(|v| v.info()).collect())
}

async fn reset(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Json<ResetRequest>, JsonRejection>,
) -> Result<Json<StateSnapshot>, AppError> {
    state.authorize(&headers)?;
    let Json(request) = body?;
    let sku = Sku::parse(&request.sku)?;
    let stock = parse_stock(request.stock)?;
    let buckets = crate::knobs::parse_buckets(request.buckets)?;
    let keys = Keys::new(&sku);
    let mut conn = state.0.store.conn().await?;
    ledger::reset_sku(&mut conn, &keys, stock, buckets, false).await?;
    tracing::info!(%sku, stock, buckets, "reset");
    Ok(Json(
        ledger::snapshot(&mut conn, &keys, sku.as_str()).await?,
    ))
}

/// `POST /api/admin/chaos`: needs the token, and an instance in chaos mode.
async fn chaos_action(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Json<ChaosAction>, JsonRejection>,
) -> Result<Json<serde_json::Value>, AppError> {
    state.authorize(&headers)?;
    if !state.0.config.chaos.enabled() {
        return Err(AppError::Forbidden(
            "chaos actions need an instance started with --chaos (stocklock up --chaos)".to_owned(),
        ));
    }
    let Json(action) = body?;
    let mut conn = state.0.store.conn().await?;
    let done = match &action {
        ChaosAction::CrashAfterAcquire => {
            chaos::arm_crash_after_acquire(&mut conn).await?;
            serde_json::json!({"armed": "crash_after_acquire"})
        }
        ChaosAction::CrashAfterWrite => {
            chaos::arm_crash_after_write(&mut conn).await?;
            serde_json::json!({"armed": "crash_after_write"})
        }
        ChaosAction::ClockSkew { ms } => {
            let skew = crate::knobs::parse_clock_skew(*ms)?;
            state.0.config.chaos.set_clock_skew(skew);
            serde_json::json!({"clock_skew_ms": skew, "instance": state.0.config.instance})
        }
        ChaosAction::PauseHolder { ms } => {
            let ms = crate::knobs::parse_ms("ms", &ms.to_string(), 1, crate::knobs::MAX_WORK_MS)?;
            chaos::arm_pause_holder(&mut conn, ms).await?;
            serde_json::json!({"armed": "pause_holder", "ms": ms})
        }
        ChaosAction::LockVanishes { sku } => {
            let sku = Sku::parse(sku)?;
            let deleted = chaos::vanish_lock(&mut conn, &Keys::new(&sku)).await?;
            serde_json::json!({"deleted": deleted, "sku": sku.as_str()})
        }
        ChaosAction::PauseRedis { .. } | ChaosAction::RestartRedis
            if !state.0.config.chaos.redis_control() =>
        {
            return Err(AppError::Forbidden(
                "pausing or restarting Redis needs the Redis that stocklock up started (not --redis-url)".to_owned(),
            ));
        }
        ChaosAction::PauseRedis { ms } => {
            let ms = crate::knobs::parse_ms("ms", &ms.to_string(), 1, crate::knobs::MAX_WORK_MS)?;
            chaos::pause_redis(&state.0.store, Duration::from_millis(ms));
            serde_json::json!({"pausing_redis_ms": ms})
        }
        ChaosAction::RestartRedis => {
            chaos::restart_redis(&state.0.store).await?;
            serde_json::json!({"restarting_redis": true})
        }
        ChaosAction::Crash => {
            chaos::crash_soon();
            serde_json::json!({"crashing": state.0.config.instance})
        }
    };
    tracing::warn!(?action, "chaos");
    Ok(Json(done))
}

/// `GET /healthz`: 200 `ok` once the instance is ready; 503 `starting`
/// until its subscription to lock releases is live (a waiter before that
/// would sleep out the holder's lease instead of being woken). `up` waits
/// for it before putting the instance behind nginx.
async fn healthz(State(state): State<AppState>) -> Response {
    let ready = state.wakeups().is_subscribed();
    let health = Health {
        status: if ready { "ok" } else { "starting" }.to_owned(),
        instance: state.0.config.instance.clone(),
        pid: std::process::id(),
    };
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(health)).into_response()
}

async fn not_found(uri: axum::http::Uri) -> AppError {
    AppError::NotFound(uri.path().to_owned())
}

async fn method_not_allowed() -> AppError {
    AppError::MethodNotAllowed
}
