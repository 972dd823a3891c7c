//! `GET /api/check?variant=V&scenario=S`: the checker's verdict on one cell
//! of the lab ([`crate::check`]) and its shortest counterexample (or the
//! witness it rests on) drawn as a timeline, for the lessons and the dashboard's scenarios.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};

use axum::Json;
use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use serde::{Deserialize, Serialize};

use crate::check::{self, Verdict};
use crate::knobs::InputError;
use crate::timeline::Timeline;
use crate::variants::{Scenario, UnknownScenario, Variant};
use crate::web::AppError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CellQuery {
    variant: String,
    scenario: String,
}

/// What the endpoint answers: the verdict, and the schedule it rests on
/// drawn (its counterexample, or its witness; `null` for a vacuous cell).
#[derive(Clone, Serialize)]
pub(super) struct CheckAnswer {
    verdict: Verdict,
    timeline: Option<Timeline>,
}

/// `GET /api/check?variant=V&scenario=S`: 400 for a name that is neither a
/// variant nor a scenario, 404 for a cell the checker does not model.
pub(super) async fn cell(
    query: Result<Query<CellQuery>, QueryRejection>,
) -> Result<Json<CheckAnswer>, AppError> {
    let Query(query) = query?;
    let variant = crate::args::parse_variant(&query.variant)
        .map_err(|detail| InputError::new("variant", detail))?;
    let scenario: Scenario = query
        .scenario
        .parse()
        .map_err(|err: UnknownScenario| InputError::new("scenario", err.to_string()))?;
    let answer = match known(variant, scenario) {
        Some(answer) => answer,
        // Up to about a million states (about a second in a release build): off
        // the runtime's threads all the same, and once per cell.
        None => tokio::task::spawn_blocking(move || {
            let answer = check::check(variant, scenario).map(|verdict| CheckAnswer {
                timeline: check::draw::timeline(&verdict),
                verdict,
            });
            remember(variant, scenario, answer.clone());
            answer
        })
        .await
        .map_err(|err| AppError::Internal(format!("the checker panicked: {err}")))?,
    };
    answer.map(Json).ok_or_else(|| {
        AppError::Missing(format!(
            "the matrix has no cell for {variant} in {scenario}: the scenario does not apply to it, so there is nothing to check"
        ))
    })
}

/// The answers given so far: a cell's verdict never changes while the
/// program runs, so a classroom opening every step checks each cell once.
static ANSWERS: LazyLock<Mutex<Answers>> = LazyLock::new(Mutex::default);

/// Each cell's answer (`None`: the cell has no model).
type Answers = HashMap<(Variant, Scenario), Option<CheckAnswer>>;

/// The answer for a cell checked before (`None`: not checked yet).
fn known(variant: Variant, scenario: Scenario) -> Option<Option<CheckAnswer>> {
    let answers = ANSWERS.lock().unwrap_or_else(PoisonError::into_inner);
    answers.get(&(variant, scenario)).cloned()
}

fn remember(variant: Variant, scenario: Scenario, answer: Option<CheckAnswer>) {
    let mut answers = ANSWERS.lock().unwrap_or_else(PoisonError::into_inner);
    answers.insert((variant, scenario), answer);
}
