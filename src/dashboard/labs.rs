//! A card's "scenarios" button: `stocklock lab --variant V`, run by the
//! instance that takes the request on a stack of the lab's own (so the
//! faults never touch the stack the workshop is watching), with its cells
//! kept in Redis for every instance's board.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::{HeaderMap, StatusCode};
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

use super::Dashboard;
use crate::knobs::InputError;
use crate::lab::Cell;
use crate::store::Store;
use crate::variants::Variant;
use crate::web::AppError;

/// Hash of variant → [`LabStatus`] as JSON.
pub const STATUS_KEY: &str = "stocklock:labs";

/// The scenarios of one variant, as the page shows them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabStatus {
    /// `running`, `done` or `failed`.
    pub state: String,
    #[serde(default)]
    pub cells: Vec<Cell>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `POST /api/admin/lab`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabRequest {
    pub variant: String,
}

async fn write(store: &Store, variant: &str, status: &LabStatus) {
    let Ok(json) = serde_json::to_string(status) else {
        return;
    };
    if let Ok(mut conn) = store.conn().await {
        let _: Result<i64, _> = conn.hset(STATUS_KEY, variant, json).await;
    }
}

/// Every variant's last scenario run.
pub async fn read(store: &Store) -> Result<BTreeMap<String, LabStatus>, crate::store::StoreError> {
    let mut conn = store.conn().await?;
    let raw: BTreeMap<String, String> = conn.hgetall(STATUS_KEY).await?;
    Ok(raw
        .into_iter()
        .filter_map(|(variant, json)| Some((variant, serde_json::from_str(&json).ok()?)))
        .collect())
}

/// `POST /api/admin/lab` `{"variant": V}`: 202, then the cells on the board.
pub async fn start(
    State(state): State<Dashboard>,
    headers: HeaderMap,
    body: Result<Json<LabRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<LabStatus>), AppError> {
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
    let store = state.store().clone();
    let mut conn = store.conn().await?;
    let running = LabStatus {
        state: "running".to_owned(),
        cells: Vec::new(),
        error: None,
    };
    let json = serde_json::to_string(&running).unwrap_or_default();
    // One run per variant at a time; a stale "running" older than ten minutes is forgotten.
    let claimed: bool = redis::cmd("SET")
        .arg(format!("{STATUS_KEY}:running:{variant}"))
        .arg(1)
        .arg("NX")
        .arg("EX")
        .arg(600)
        .query_async::<Option<String>>(&mut conn)
        .await
        .map_err(crate::store::StoreError::from)?
        .is_some();
    if !claimed {
        return Err(AppError::Conflict(format!(
            "the scenarios of {variant} are already running"
        )));
    }
    let _: i64 = conn
        .hset(STATUS_KEY, variant.name(), json)
        .await
        .map_err(crate::store::StoreError::from)?;

    tokio::spawn(async move {
        let status = run_lab(variant).await;
        write(&store, variant.name(), &status).await;
        if let Ok(mut conn) = store.conn().await {
            let _: Result<i64, _> = conn.del(format!("{STATUS_KEY}:running:{variant}")).await;
        }
    });
    Ok((StatusCode::ACCEPTED, Json(running)))
}

/// Runs `stocklock lab --variant V --json FILE` as a child process.
async fn run_lab(variant: Variant) -> LabStatus {
    let failed = |error: String| LabStatus {
        state: "failed".to_owned(),
        cells: Vec::new(),
        error: Some(error),
    };
    let args = ["lab", "--variant", variant.name()];
    match crate::harness::child::json_of::<crate::lab::LabReport>(&args).await {
        Ok(report) => LabStatus {
            state: "done".to_owned(),
            cells: report.cells,
            error: None,
        },
        Err(error) => failed(error),
    }
}
