//! The lesson path's routes: the page, every step's last run, and the
//! button that runs a step's experiment on this stack ([`crate::lessons`]).

use askama::Template;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Html;

use super::Dashboard;
use crate::lessons::{self, Lessons, STEPS, StartError, Status, Step};
use crate::web::AppError;

#[derive(Template)]
#[template(path = "lessons.html")]
struct LessonsPage {
    steps: &'static [Step],
    instance: String,
}

/// `GET /lessons`
pub(super) async fn page(State(state): State<Dashboard>) -> Result<Html<String>, AppError> {
    LessonsPage {
        steps: &STEPS,
        instance: state.instance().to_owned(),
    }
    .render()
    .map(Html)
    .map_err(|err| AppError::Internal(format!("template: {err}")))
}

/// `GET /api/lessons`
pub(super) async fn statuses(State(state): State<Dashboard>) -> Result<Json<Lessons>, AppError> {
    Ok(Json(lessons::read(state.store()).await?))
}

/// `POST /api/admin/lessons/{id}`: 202, then the step's result in
/// `/api/lessons`; 409 while another experiment runs.
pub(super) async fn run(
    State(state): State<Dashboard>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Status>), AppError> {
    state.authorize(&headers)?;
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
    match lessons::start(state.store(), step, &stack).await {
        Ok(status) => Ok((StatusCode::ACCEPTED, Json(status))),
        Err(StartError::Busy) => Err(AppError::Conflict(StartError::Busy.to_string())),
        Err(StartError::Unavailable(detail)) => Err(AppError::Internal(detail)),
        Err(StartError::Store(err)) => Err(err.into()),
    }
}
