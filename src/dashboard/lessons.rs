//! The lesson path's routes: the page, every step's last run, and the
//! button that runs a step's experiment on this stack ([`crate::lessons`]).

use askama::Template;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Html;

use super::Dashboard;
use super::classroom::Actor;
use crate::lessons::{self, Lessons, STEPS, StartError, Status, Step, Who};
use crate::web::AppError;

#[derive(Template)]
#[template(path = "lessons.html")]
struct LessonsPage {
    steps: &'static [Step],
    instance: String,
    /// The classroom seat the page is shown to: its name, and what its
    /// SKUs start with (empty for the teacher).
    seat: String,
    sku_prefix: String,
}

/// `GET /lessons`
pub(super) async fn page(
    State(state): State<Dashboard>,
    headers: HeaderMap,
) -> Result<Html<String>, AppError> {
    let seat = state.seat_of(&headers).await;
    LessonsPage {
        steps: &STEPS,
        instance: state.instance().to_owned(),
        sku_prefix: seat
            .as_ref()
            .map(|s| crate::classroom::jobs::sku_prefix(&s.id))
            .unwrap_or_default(),
        seat: seat.map(|s| s.name).unwrap_or_default(),
    }
    .render()
    .map(Html)
    .map_err(|err| AppError::Internal(format!("template: {err}")))
}

/// `GET /api/lessons`: the stack's results, or a seat's own (its cookie).
pub(super) async fn statuses(
    State(state): State<Dashboard>,
    headers: HeaderMap,
) -> Result<Json<Lessons>, AppError> {
    let seat = state.seat_of(&headers).await;
    let who = seat.as_ref().map_or(Who::Teacher, |s| Who::Seat(&s.id));
    Ok(Json(lessons::read(state.store(), who).await?))
}

/// `POST /api/admin/lessons/{id}` (the teacher) and `POST /api/lessons/{id}`
/// (the teacher or a classroom seat, on its own SKUs): 202, then the
/// step's result in `/api/lessons`; 409 while another experiment runs.
pub(super) async fn run(
    State(state): State<Dashboard>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Status>), AppError> {
    let actor = state.actor(&headers).await?;
    let who = match &actor {
        Actor::Teacher => Who::Teacher,
        Actor::Seat(seat) => Who::Seat(&seat.id),
    };
    let step = lessons::find(&id).ok_or_else(|| {
        let ids: Vec<&str> = STEPS.iter().map(|s| s.id).collect();
        AppError::Missing(format!(
            "no lesson step {id:?}; the steps: {}",
            ids.join(", ")
        ))
    })?;
    if !state.0.parts.chaos {
        return Err(AppError::Forbidden(
            "the lessons' experiments need chaos mode (stocklock up, without --no-chaos)"
                .to_owned(),
        ));
    }
    let redis_url = state.store().single_url().ok_or_else(|| {
        AppError::NotConfigured(
            "the lessons run on a stack with one Redis (not a cluster or Sentinel)".to_owned(),
        )
    })?;
    let stack = lessons::Stack {
        url: state.public_url(),
        admin_token: state.admin_token(),
        redis_url,
    };
    match lessons::start(state.store(), step, &stack, who).await {
        Ok(status) => Ok((StatusCode::ACCEPTED, Json(status))),
        Err(err @ (StartError::Busy | StartError::SeatBusy | StartError::ClassBusy)) => {
            Err(AppError::Conflict(err.to_string()))
        }
        Err(err @ StartError::NotASeats) => Err(AppError::Forbidden(err.to_string())),
        Err(StartError::Unavailable(detail)) => Err(AppError::Internal(detail)),
        Err(StartError::Store(err)) => Err(err.into()),
    }
}
