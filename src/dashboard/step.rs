//! Step mode's routes: the page, and a run started, read and stepped
//! ([`crate::lab::step`]). Starting and stepping a run are admin actions:
//! they hold buyers and strike faults on the live stack.

use askama::Template;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Html;
use serde::{Deserialize, Serialize};

use super::Dashboard;
use crate::knobs::InputError;
use crate::lab::stack::Stack;
use crate::lab::step::{self, Command, StepView};
use crate::variants::{Scenario, Variant};
use crate::web::AppError;

/// One cell in the page's picker: whether step mode plays it, and why not.
struct CellChoice {
    variant: &'static str,
    scenario: &'static str,
    why_not: Option<&'static str>,
}

#[derive(Template)]
#[template(path = "step.html")]
struct StepPage {
    instance: String,
    cells: Vec<CellChoice>,
    variant: String,
    scenario: String,
    /// A lesson's goal, when the page was opened from one.
    goal: String,
    goal_zh: String,
}

/// `GET /step?variant=V&scenario=S`: the page, with that cell picked.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Picked {
    variant: Option<String>,
    scenario: Option<String>,
}

/// `GET /step`
pub(super) async fn page(
    State(state): State<Dashboard>,
    Query(picked): Query<Picked>,
) -> Result<Html<String>, AppError> {
    let mut cells = Vec::new();
    for variant in Variant::ALL {
        for scenario in Scenario::ALL {
            if scenario.claim(variant).applies() {
                cells.push(CellChoice {
                    variant: variant.name(),
                    scenario: scenario.name(),
                    why_not: step::unplayable(variant, scenario),
                });
            }
        }
    }
    StepPage {
        instance: state.instance().to_owned(),
        cells,
        variant: picked.variant.unwrap_or_else(|| "none".to_owned()),
        scenario: picked.scenario.unwrap_or_else(|| "race".to_owned()),
        goal: String::new(),
        goal_zh: String::new(),
    }
    .render()
    .map(Html)
    .map_err(|err| AppError::Internal(format!("template: {err}")))
}

/// `POST /api/admin/step`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StartStep {
    variant: String,
    scenario: String,
    /// 2 or 3 (the default).
    #[serde(default)]
    buyers: Option<u8>,
}

/// `POST /api/admin/step` `{"variant": V, "scenario": S, "buyers": 2}`: 201 and the
/// run's first view, every buyer at its first gate.
pub(super) async fn start(
    State(state): State<Dashboard>,
    headers: HeaderMap,
    body: Result<Json<StartStep>, JsonRejection>,
) -> Result<(StatusCode, Json<StepView>), AppError> {
    state.authorize(&headers)?;
    let Json(request) = body?;
    let variant: Variant = request.variant.parse().map_err(|_| {
        InputError::new(
            "variant",
            format!(
                "no variant {:?}; valid: {}",
                request.variant,
                Variant::names().join(", ")
            ),
        )
    })?;
    let scenario: Scenario = request.scenario.parse().map_err(|_| {
        let names: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
        InputError::new(
            "scenario",
            format!(
                "no scenario {:?}; valid: {}",
                request.scenario,
                names.join(", ")
            ),
        )
    })?;
    let buyers = request.buyers.unwrap_or(*step::BUYERS.end());
    if !step::BUYERS.contains(&buyers) {
        return Err(InputError::new(
            "buyers",
            format!(
                "{buyers} buyers; a run has {} to {}",
                step::BUYERS.start(),
                step::BUYERS.end()
            ),
        )
        .into());
    }
    if let Some(why) = step::unplayable(variant, scenario) {
        return Err(AppError::Conflict(format!(
            "{variant} in {scenario} is not played in step mode: {why}"
        )));
    }
    if !state.0.parts.chaos {
        return Err(AppError::Forbidden(
            "step mode holds buyers at gates, which needs chaos mode (stocklock up, without --no-chaos)"
                .to_owned(),
        ));
    }
    let redis_url = state.store().single_url().ok_or_else(|| {
        AppError::NotConfigured(
            "step mode runs on a stack with one Redis (not a cluster or Sentinel)".to_owned(),
        )
    })?;
    let stack = attach(&state)
        .await
        .map_err(|err| AppError::Internal(format!("the stack: {err:#}")))?;
    let cell = (variant, scenario);
    let started = step::start(
        state.store().clone(),
        stack,
        redis_url.to_owned(),
        cell,
        buyers,
    );
    match started.await {
        Ok(view) => Ok((StatusCode::CREATED, Json(view))),
        Err(err) => Err(AppError::Internal(format!("{err:#}"))),
    }
}

/// The live stack as the run's buyers see it: every healthy instance, a
/// client that waits for an answer as long as a learner may think.
async fn attach(state: &Dashboard) -> anyhow::Result<Stack> {
    let mut stack = Stack::attach(state.public_url(), state.admin_token()).await?;
    stack.client = crate::client::StackClient::new(
        state.public_url(),
        Some(state.admin_token().to_owned()),
        step::IDLE,
    )?;
    Ok(stack)
}

/// `GET /api/admin/step/{id}`: the run's last view.
pub(super) async fn read(
    State(state): State<Dashboard>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<StepView>, AppError> {
    state.authorize(&headers)?;
    let view = step::view(state.store(), &id)
        .await
        .map_err(|err| AppError::Internal(format!("{err:#}")))?;
    view.map(Json).ok_or_else(|| {
        AppError::Missing(format!("no step-mode run {id:?} (it ended, or never was)"))
    })
}

/// `POST /api/admin/step/{id}` `{"take": CHOICE}` or `"end"`: the view
/// once the step was taken and every buyer stopped again; 409 for a step
/// not offered now.
pub(super) async fn take(
    State(state): State<Dashboard>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Result<Json<Command>, JsonRejection>,
) -> Result<Json<StepView>, AppError> {
    state.authorize(&headers)?;
    let Json(command) = body?;
    let view = step::view(state.store(), &id)
        .await
        .map_err(|err| AppError::Internal(format!("{err:#}")))?
        .ok_or_else(|| {
            AppError::Missing(format!("no step-mode run {id:?} (it ended, or never was)"))
        })?;
    if view.over {
        return Err(AppError::Conflict(format!("run {id} is over")));
    }
    match step::command(state.store(), &id, command).await {
        Ok(view) => Ok(Json(view)),
        Err(err) => Err(AppError::Conflict(format!("{err:#}"))),
    }
}
