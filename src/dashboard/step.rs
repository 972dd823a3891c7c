//! Step mode's routes: the page, and a run started, read and stepped
//! ([`crate::step`]). Starting and stepping a run are admin actions:
//! they hold buyers and strike faults on the live stack.

use askama::Template;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Html;
use serde::{Deserialize, Serialize};

use super::Dashboard;
use super::classroom::Actor;
use crate::classroom::{self, Seat};
use crate::harness::stack::Stack;
use crate::knobs::InputError;
use crate::step::anyway::{self, AnyWay};
use crate::step::{self, Command, StepView};
use crate::variants::{Scenario, Variant};
use crate::web::AppError;

/// One cell in the page's picker: whether step mode plays it, and why not.
struct CellChoice {
    variant: &'static str,
    scenario: &'static str,
    why_not: Option<&'static str>,
    /// A "break it" level: the cell's claim is a failure (an oversell, a
    /// deadlock, units lost); else a "show it can't break" one.
    breaks: bool,
}

/// The cells step mode does not play, by why (a list on the page: a
/// disabled option's tooltip never shows on a touch screen).
struct WhyNot {
    en: &'static str,
    zh: &'static str,
    cells: Vec<String>,
}

#[derive(Template)]
#[template(path = "step.html")]
struct StepPage {
    instance: String,
    cells: Vec<CellChoice>,
    why_not: Vec<WhyNot>,
    variant: String,
    scenario: String,
    /// A lesson's goal, when the page was opened from one.
    goal: String,
    goal_zh: String,
    /// The classroom seat the page is shown to (empty: none).
    seat: String,
}

/// `GET /step?variant=V&scenario=S`: the page, with that cell picked.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Picked {
    variant: Option<String>,
    scenario: Option<String>,
    /// A lesson step's id: its cell, and its goal stated.
    lesson: Option<String>,
}

/// `GET /step`
pub(super) async fn page(
    State(state): State<Dashboard>,
    headers: HeaderMap,
    Query(picked): Query<Picked>,
) -> Result<Html<String>, AppError> {
    let seat = state.seat_of(&headers).await.map(|seat| seat.name);
    let mut cells = Vec::new();
    for variant in Variant::ALL {
        for scenario in Scenario::ALL {
            if scenario.claim(variant).applies() {
                cells.push(CellChoice {
                    variant: variant.name(),
                    scenario: scenario.name(),
                    why_not: step::unplayable(variant, scenario),
                    breaks: scenario.claim(variant).behaviour.is_failure(),
                });
            }
        }
    }
    let lesson = picked.lesson.as_deref().and_then(crate::lessons::find);
    let variant = match lesson {
        Some(step) => step.variant.to_owned(),
        None => picked.variant.unwrap_or_else(|| "none".to_owned()),
    };
    let asked = match lesson {
        Some(step) => step.scenario.to_owned(),
        None => picked.scenario.unwrap_or_else(|| "race".to_owned()),
    };
    // A card names only its variant: its first scenario step mode plays.
    let playable = |c: &&CellChoice| c.variant == variant && c.why_not.is_none();
    let scenario = match cells.iter().filter(playable).find(|c| c.scenario == asked) {
        Some(_) => asked,
        None => (cells.iter().find(playable)).map_or(asked, |c| c.scenario.to_owned()),
    };
    let mut why_not: Vec<WhyNot> = Vec::new();
    for cell in &cells {
        let Some(why) = cell.why_not else { continue };
        let name = format!("{} · {}", cell.variant, cell.scenario);
        match why_not.iter_mut().find(|group| group.en == why) {
            Some(group) => group.cells.push(name),
            None => why_not.push(WhyNot {
                en: why,
                zh: step::in_chinese(why),
                cells: vec![name],
            }),
        }
    }
    StepPage {
        instance: state.instance().to_owned(),
        cells,
        why_not,
        variant,
        scenario,
        goal: lesson.map_or("", |step| step.goal).to_owned(),
        goal_zh: lesson.map_or("", |step| step.goal_zh).to_owned(),
        seat: seat.unwrap_or_default(),
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
    let actor = state.actor(&headers).await?;
    let Json(request) = body?;
    let (variant, scenario) = cell(&request.variant, &request.scenario)?;
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
    let redis_url = playable(&state, variant, scenario)?;
    let stack = attach(&state)
        .await
        .map_err(|err| AppError::Internal(format!("the stack: {err:#}")))?;
    let cell = (variant, scenario);
    let started = step::start(state.store().clone(), stack, redis_url, cell, buyers);
    let view = started
        .await
        .map_err(|err| AppError::Internal(format!("{err:#}")))?;
    if let Actor::Seat(seat) = actor {
        seated(&state, &seat, &view, (variant, scenario)).await?;
    }
    Ok((StatusCode::CREATED, Json(view)))
}

/// A seat's new run: marked its own, and the run it had before ended (a
/// seat drives one run at a time).
async fn seated(
    state: &Dashboard,
    seat: &Seat,
    view: &StepView,
    (variant, scenario): (Variant, Scenario),
) -> Result<(), AppError> {
    let store = state.store();
    step::set_owner(store, &view.id, &seat.id)
        .await
        .map_err(|err| AppError::Internal(format!("{err:#}")))?;
    let cell = format!("{variant}/{scenario}");
    if let Some(before) = classroom::started(store, &seat.id, &view.id, &cell).await? {
        let store = store.clone();
        tokio::spawn(async move {
            if matches!(step::view(&store, &before).await, Ok(Some(v)) if !v.over) {
                let _ = step::command(&store, &before, Command::End).await;
            }
        });
    }
    Ok(())
}

/// Lets the teacher at any run, and a seat at its own only.
async fn may_touch(state: &Dashboard, actor: &Actor, id: &str) -> Result<(), AppError> {
    let Actor::Seat(seat) = actor else {
        return Ok(());
    };
    let owner = step::owner(state.store(), id)
        .await
        .map_err(|err| AppError::Internal(format!("{err:#}")))?;
    match owner.as_deref() == Some(seat.id.as_str()) {
        true => Ok(()),
        false => Err(AppError::Forbidden(format!(
            "run {id} is not {}'s: a seat steps its own runs only",
            seat.name
        ))),
    }
}

/// The variant and scenario named, or 400.
fn cell(variant: &str, scenario: &str) -> Result<(Variant, Scenario), AppError> {
    let parsed: Variant = variant.parse().map_err(|_| {
        InputError::new(
            "variant",
            format!(
                "no variant {variant:?}; valid: {}",
                Variant::names().join(", ")
            ),
        )
    })?;
    let names: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
    let scenario = scenario.parse().map_err(|_| {
        InputError::new(
            "scenario",
            format!("no scenario {scenario:?}; valid: {}", names.join(", ")),
        )
    })?;
    Ok((parsed, scenario))
}

/// Refuses a cell step mode does not play, or a stack it cannot play on;
/// the stack's one Redis.
fn playable(state: &Dashboard, variant: Variant, scenario: Scenario) -> Result<String, AppError> {
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
    Ok(redis_url.to_owned())
}

/// `POST /api/admin/step/anyway` `{"variant": V, "scenario": S}`: 202, an
/// exploration of the cell on this stack ("is there any way?"); its
/// result in `GET /api/admin/step/anyway?variant=V&scenario=S`.
pub(super) async fn any_way(
    State(state): State<Dashboard>,
    headers: HeaderMap,
    body: Result<Json<Cell>, JsonRejection>,
) -> Result<(StatusCode, Json<AnyWay>), AppError> {
    state.authorize(&headers)?;
    let Json(request) = body?;
    let (variant, scenario) = cell(&request.variant, &request.scenario)?;
    let redis_url = playable(&state, variant, scenario)?;
    let target = anyway::Target {
        url: state.public_url().to_owned(),
        admin_token: state.admin_token().to_owned(),
        redis_url,
    };
    let started = anyway::start(state.store().clone(), (variant, scenario), target).await;
    match started {
        Ok(way) => Ok((StatusCode::ACCEPTED, Json(way))),
        Err(err) => Err(AppError::Internal(format!("{err:#}"))),
    }
}

/// `GET /api/admin/step/anyway?variant=V&scenario=S`: the cell's last
/// exploration from step mode.
pub(super) async fn any_way_status(
    State(state): State<Dashboard>,
    headers: HeaderMap,
    Query(request): Query<Cell>,
) -> Result<Json<AnyWay>, AppError> {
    state.authorize(&headers)?;
    let (variant, scenario) = cell(&request.variant, &request.scenario)?;
    let way = anyway::status(state.store(), variant, scenario)
        .await
        .map_err(|err| AppError::Internal(format!("{err:#}")))?;
    way.map(Json).ok_or_else(|| {
        AppError::Missing(format!(
            "{variant} in {scenario} was not explored from step mode"
        ))
    })
}

/// A cell, named.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Cell {
    variant: String,
    scenario: String,
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
    let actor = state.actor(&headers).await?;
    may_touch(&state, &actor, &id).await?;
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
    let actor = state.actor(&headers).await?;
    may_touch(&state, &actor, &id).await?;
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
    let view = step::command(state.store(), &id, command)
        .await
        .map_err(|err| AppError::Conflict(format!("{err:#}")))?;
    if let Actor::Seat(seat) = &actor {
        let violation = view.verdict.as_ref().is_some_and(|v| v.violation);
        let progress = (view.steps.len(), view.over, violation);
        classroom::stepped(state.store(), &seat.id, &id, progress).await?;
    }
    Ok(Json(view))
}
