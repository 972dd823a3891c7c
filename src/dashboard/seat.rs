//! A classroom seat's cards ([`crate::classroom`]): the dashboard a seat
//! sees shows its own SKUs (`seat-ID-VARIANT`); its Run races them and its
//! Reset starts them over, never another seat's nor the stack's own. A
//! run is one of the seat's jobs: one at a time, a few seats' at once.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;

use super::Dashboard;
use super::classroom::Actor;
use super::runs::{
    Run, SEAT_CONCURRENCY, SEAT_REQUESTS, SEAT_RUN_LIMIT, bounded, load_config, running,
    seat_status_key, validate,
};
use crate::classroom::{Seat, jobs};
use crate::knobs::parse_stock;
use crate::web::AppError;
use crate::wire::{RunRequest, RunStatus, StateSnapshot};

impl Dashboard {
    /// The seat a request comes from (its cookie, counted against its
    /// rate); 403 for the teacher, whose runs and resets are the
    /// `/api/admin/` ones.
    async fn seat_acting(&self, headers: &HeaderMap) -> Result<Seat, AppError> {
        match self.actor(headers).await? {
            Actor::Seat(seat) => Ok(seat),
            Actor::Teacher => Err(AppError::Forbidden(
                "this is a classroom seat's route; the teacher's are /api/admin/run and /api/admin/reset"
                    .to_owned(),
            )),
        }
    }
}

/// `POST /api/seat/run`: a classroom seat's run, on its own SKUs
/// (`seat-ID-VARIANT`), as one of its jobs (one at a time, a few seats'
/// at once); 202 with its status, shown on the seat's board.
pub(super) async fn seat_start(
    State(state): State<Dashboard>,
    headers: HeaderMap,
    body: Result<Json<RunRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<RunStatus>), AppError> {
    let seat = state.seat_acting(&headers).await?;
    let Json(request) = body?;
    let variants = validate(&request)?;
    bounded("requests", request.requests, 1, SEAT_REQUESTS)?;
    bounded(
        "concurrency",
        request.concurrency as u64,
        1,
        SEAT_CONCURRENCY as u64,
    )?;
    let store = state.store().clone();
    let mut conn = store.conn().await?;
    if let Err(refused) = jobs::claim(&mut conn, &seat.id, SEAT_RUN_LIMIT).await? {
        return Err(AppError::Conflict(refused.why()));
    }
    let config = load_config(&state, &request, &jobs::sku_prefix(&seat.id));
    let run = Run {
        store,
        key: seat_status_key(&seat.id),
        status: running(format!("seat-{}", seat.id), &variants, &request),
    };
    let answer = run.status.clone();
    let store = run.store.clone();
    tokio::spawn(async move {
        let limited = tokio::time::timeout(SEAT_RUN_LIMIT, run.go(&config, &variants)).await;
        if limited.is_err() {
            tracing::warn!(seat = seat.id, "a seat's run outlived its limit");
        }
        if let Ok(mut conn) = store.conn().await {
            let _ = jobs::release(&mut conn, &seat.id).await;
        }
    });
    Ok((StatusCode::ACCEPTED, Json(answer)))
}

/// `POST /api/seat/reset`: `{variant, stock}`.
#[derive(Debug, Deserialize)]
pub(super) struct SeatReset {
    variant: String,
    stock: i64,
}

/// `POST /api/seat/reset`: the seat's own SKU of `variant` starts over
/// with `stock`; its state after.
pub(super) async fn seat_reset(
    State(state): State<Dashboard>,
    headers: HeaderMap,
    body: Result<Json<SeatReset>, JsonRejection>,
) -> Result<Json<StateSnapshot>, AppError> {
    let seat = state.seat_acting(&headers).await?;
    let Json(request) = body?;
    let variant = crate::args::parse_variant(&request.variant)
        .map_err(|detail| crate::knobs::InputError::new("variant", detail))?;
    let stock = parse_stock(request.stock)?;
    let sku = format!("{}{}", jobs::sku_prefix(&seat.id), variant.name());
    let client = crate::client::StackClient::new(
        state.public_url(),
        Some(state.admin_token().to_owned()),
        std::time::Duration::from_secs(10),
    )
    .map_err(|err| AppError::Internal(format!("{err:#}")))?;
    let after = client
        .reset(&sku, stock, variant.buckets())
        .await
        .map_err(|err| AppError::Internal(format!("{err:#}")))?;
    Ok(Json(after))
}
