//! What the instance's two HTTP surfaces share, below both of them: the
//! API's handlers (`http`) and the page's (`dashboard`).
//!
//! One error type, [`AppError`], that every handler returns with `?` and
//! that leaves as JSON `{error, detail}`; and one way into the admin routes,
//! [`AdminToken`].

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::knobs::{InputError, Sku};
use crate::sale::SaleError;
use crate::store::StoreError;
use crate::variants::Variant;
use crate::wire::ErrorBody;

/// The bearer token of `/api/admin/*`. Cheap to clone.
#[derive(Clone)]
pub struct AdminToken(Arc<str>);

impl AdminToken {
    /// An empty token lets nobody in.
    pub fn new(token: &str) -> Self {
        Self(token.into())
    }

    /// Accepts `Authorization: Bearer <token>` when it equals the admin token,
    /// comparing in constant time so the token cannot be guessed byte by byte.
    pub fn authorize(&self, headers: &HeaderMap) -> Result<(), AppError> {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        let expected = self.0.as_bytes();
        if !expected.is_empty() && bool::from(given.as_bytes().ct_eq(expected)) {
            Ok(())
        } else {
            Err(AppError::Unauthorized)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
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
    /// 403: not allowed on this instance (chaos without chaos mode), or
    /// not to this seat (another seat's run).
    Forbidden(String),
    /// 429: a classroom seat past its rate.
    RateLimited(String),
    /// 503: Redis (or a lock store) is away; the request decided nothing.
    Unavailable(StoreError),
    /// 503: this instance was not given what the request needs (Redlock's nodes).
    NotConfigured(String),
    /// 404: no such thing (an order), with what to do.
    Missing(String),
    /// 503: the orders' database is away (or the instance has none).
    DatabaseUnavailable(String),
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

impl From<crate::lock::Error> for AppError {
    fn from(err: crate::lock::Error) -> Self {
        AppError::Unavailable(err.into())
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
            AppError::Missing(detail) => (StatusCode::NOT_FOUND, "not_found", detail, None),
            AppError::DatabaseUnavailable(detail) => {
                tracing::warn!(%detail, "orders' database unavailable");
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "database_unavailable",
                    detail,
                    None,
                )
            }
            AppError::Forbidden(detail) => (StatusCode::FORBIDDEN, "forbidden", detail, None),
            AppError::RateLimited(detail) => {
                (StatusCode::TOO_MANY_REQUESTS, "rate_limited", detail, None)
            }
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
                    format!("a store is unavailable; nothing was sold: {err}"),
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
