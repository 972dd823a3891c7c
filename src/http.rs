//! The HTTP layer: extract and validate, call the domain, map the outcome.
//!
//! [`app`] builds the whole router from an [`AppState`], so tests can drive it
//! with `tower::ServiceExt::oneshot` without a socket. Every error leaves as
//! JSON `{error, detail}` through [`AppError`]; sold out and busy are not
//! errors but outcomes, with their own status codes.

use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use subtle::ConstantTimeEq;
use tower_http::trace::TraceLayer;

use crate::knobs::{DeductRequest, InputError, Sku, parse_stock};
use crate::ledger;
use crate::lock::Wakeups;
use crate::sale::Outcome;
use crate::store::{Keys, Store, StoreError};
use crate::variants::{Ctx, Protections, Variant};
use crate::wire::{
    DeductResponse, ErrorBody, Health, OutcomeKind, ResetRequest, StateSnapshot, VariantInfo,
};

/// What every handler shares. Cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

struct Shared {
    store: Store,
    /// This instance's name, reported in every answer.
    instance: String,
    /// Bearer token of `/api/admin/*`.
    admin_token: String,
    /// The variant of `GET /deductStock`.
    default_variant: Variant,
    protections: Protections,
    wakeups: Wakeups,
}

impl AppState {
    /// The state of one instance. `wakeups` must be fed by a listener
    /// ([`Wakeups::listen`]) for waiters to be woken by releases; without one
    /// they still re-check when the holder's lease runs out.
    pub fn new(
        store: Store,
        instance: String,
        admin_token: String,
        default_variant: Variant,
        wakeups: Wakeups,
    ) -> Self {
        Self(Arc::new(Shared {
            store,
            instance,
            admin_token,
            default_variant,
            protections: Protections::new(),
            wakeups,
        }))
    }
}

/// The whole router of one instance.
pub fn app(state: AppState) -> Router {
    Router::new()
        .route("/deductStock", get(deduct_default).post(deduct_default))
        .route("/deductStock/{variant}", get(deduct).post(deduct))
        .route("/api/state", get(state_of))
        .route("/api/variants", get(variants))
        .route("/api/admin/reset", post(reset))
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
    /// 404: no such route.
    NotFound(String),
    /// 405
    MethodNotAllowed,
    /// 401: missing or wrong admin token.
    Unauthorized,
    /// 503: Redis is away; the request decided nothing.
    Unavailable(StoreError),
    /// 500: a bug of ours (a panicked task). Never caused by input.
    Internal(String),
}

impl From<InputError> for AppError {
    fn from(err: InputError) -> Self {
        AppError::Invalid(err)
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
            AppError::Unavailable(err) => {
                tracing::warn!(%err, "store unavailable");
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "store_unavailable",
                    format!("Redis is unavailable, nothing was changed: {err}"),
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
    let variant = state.0.default_variant;
    run_deduct(state, variant, query?.0).await
}

async fn run_deduct(state: AppState, variant: Variant, pairs: Pairs) -> Result<Response, AppError> {
    let request = DeductRequest::parse(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))?;
    let conn = state.0.store.conn().await?;
    // The sale runs in its own task: a client that hangs up must not cancel a
    // section halfway, between its write and the ledger, or while it holds a lock.
    let shared = state.0.clone();
    let task = tokio::spawn(async move {
        let keys = Keys::new(&request.sku);
        let mut ctx = Ctx {
            conn,
            keys: &keys,
            knobs: &request.knobs,
            instance: &shared.instance,
            wakeups: &shared.wakeups,
        };
        let outcome = shared.protections.deduct(variant, &mut ctx).await?;
        if !variant.records_itself() {
            ledger::record(&mut ctx.conn, &keys, &shared.instance, &outcome).await?;
        }
        Ok::<_, StoreError>((request.sku, outcome))
    });
    let (sku, outcome) = task
        .await
        .map_err(|err| AppError::Internal(format!("the sale task failed: {err}")))??;

    let (status, kind, unit, remaining, reason) = match outcome {
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
    };
    let body = DeductResponse {
        outcome: kind,
        variant: variant.name().to_owned(),
        sku: sku.to_string(),
        unit,
        remaining,
        instance: state.0.instance.clone(),
        reason,
    };
    Ok((status, Json(body)).into_response())
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

/// Accepts `Authorization: Bearer <token>` when it equals the admin token,
/// comparing in constant time so the token cannot be guessed byte by byte.
fn authorize(state: &AppState, headers: &HeaderMap) -> Result<(), AppError> {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    let expected = state.0.admin_token.as_bytes();
    if !expected.is_empty() && bool::from(given.as_bytes().ct_eq(expected)) {
        Ok(())
    } else {
        Err(AppError::Unauthorized)
    }
}

async fn reset(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Json<ResetRequest>, JsonRejection>,
) -> Result<Json<StateSnapshot>, AppError> {
    authorize(&state, &headers)?;
    let Json(request) = body?;
    let sku = Sku::parse(&request.sku)?;
    let stock = parse_stock(request.stock)?;
    let keys = Keys::new(&sku);
    let mut conn = state.0.store.conn().await?;
    ledger::reset(&mut conn, &keys, stock, false).await?;
    tracing::info!(%sku, stock, "reset");
    Ok(Json(
        ledger::snapshot(&mut conn, &keys, sku.as_str()).await?,
    ))
}

async fn healthz(State(state): State<AppState>) -> Json<Health> {
    Json(Health {
        status: "ok".to_owned(),
        instance: state.0.instance.clone(),
        pid: std::process::id(),
    })
}

async fn not_found(uri: axum::http::Uri) -> AppError {
    AppError::NotFound(uri.path().to_owned())
}

async fn method_not_allowed() -> AppError {
    AppError::MethodNotAllowed
}
