//! `/deductStock`: parse the request, sell through the domain, map the sale
//! to its status and body. Sold out and busy are outcomes, not errors.

use axum::Json;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::{AppState, Pairs};
use crate::knobs::{DeductRequest, InputError};
use crate::sale::Sale;
use crate::section::Outcome;
use crate::variants::Variant;
use crate::web::AppError;
use crate::wire::{DeductResponse, OutcomeKind};

/// `GET|POST /deductStock/{variant}`
pub(super) async fn deduct(
    State(state): State<AppState>,
    variant: Result<Path<String>, PathRejection>,
    query: Result<Query<Pairs>, QueryRejection>,
) -> Result<Response, AppError> {
    let Path(name) = variant?;
    let variant: Variant = name.parse().map_err(|_| AppError::UnknownVariant(name))?;
    run_deduct(state, variant, query?.0).await
}

/// `GET|POST /deductStock`: the instance's default variant.
pub(super) async fn deduct_default(
    State(state): State<AppState>,
    query: Result<Query<Pairs>, QueryRejection>,
) -> Result<Response, AppError> {
    let variant = state.default_variant();
    run_deduct(state, variant, query?.0).await
}

async fn run_deduct(state: AppState, variant: Variant, pairs: Pairs) -> Result<Response, AppError> {
    let request = DeductRequest::parse(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))?;
    if request.schedule.is_some() && !state.seller().chaos().enabled() {
        return Err(InputError::new(
            "schedule",
            "a schedule's gates are off on this instance: it needs chaos mode (serve --chaos, up --chaos)",
        )
        .into());
    }
    let sale = state.seller().sell(variant, request).await?;
    Ok(sale_response(sale, state.instance()))
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
        from_mark: sale.from_mark,
        order_token: sale.order_token,
    };
    (status, Json(body)).into_response()
}
