//! "Is there any way?": an exploration of the cell on the live stack
//! (`stocklock explore --target`, a child process, its buyers on a SKU of
//! their own), its result kept in Redis for every instance's page.

use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

use crate::store::Store;
use crate::variants::{Scenario, Variant};

/// How many schedules one asking explores at most (it stops at the first
/// that breaks a property).
pub const SCHEDULES: usize = 100;
/// How long its result is kept.
const KEEP_SECS: u64 = 3600;

fn key(variant: Variant, scenario: Scenario) -> String {
    format!("{{stocklock:step}}:anyway:{variant}:{scenario}")
}

/// An exploration asked from step mode.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AnyWay {
    /// `running`, `done` or `failed`.
    pub state: String,
    pub schedules: usize,
    /// Whether a schedule broke a property, and what the ledger showed.
    pub found: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger: Option<String>,
    /// The same, in Chinese.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger_zh: Option<String>,
    /// The steps of the schedule that broke it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What `explore --json` wrote that step mode shows.
#[derive(Deserialize)]
struct Explored {
    schedules: usize,
    found: Option<Found>,
}

#[derive(Deserialize)]
struct Found {
    steps: Vec<serde_json::Value>,
    ledger: String,
    #[serde(default)]
    ledger_zh: String,
}

/// Where the child explores: the stack's URL, admin token and Redis.
pub struct Target {
    pub url: String,
    pub admin_token: String,
    pub redis_url: String,
}

/// The last exploration of the cell, if any.
pub async fn status(
    store: &Store,
    variant: Variant,
    scenario: Scenario,
) -> anyhow::Result<Option<AnyWay>> {
    let mut conn = store.conn().await?;
    let json: Option<String> = conn.get(key(variant, scenario)).await?;
    Ok(json.and_then(|json| serde_json::from_str(&json).ok()))
}

async fn keep(store: &Store, variant: Variant, scenario: Scenario, way: &AnyWay) {
    let (Ok(json), Ok(mut conn)) = (serde_json::to_string(way), store.conn().await) else {
        return;
    };
    let _: Result<(), _> = conn.set_ex(key(variant, scenario), json, KEEP_SECS).await;
}

/// Starts an exploration of the cell unless one runs: its status now.
pub async fn start(
    store: Store,
    (variant, scenario): (Variant, Scenario),
    target: Target,
) -> anyhow::Result<AnyWay> {
    if let Some(way) = status(&store, variant, scenario).await?
        && way.state == "running"
    {
        return Ok(way);
    }
    let running = AnyWay {
        state: "running".to_owned(),
        schedules: SCHEDULES,
        found: None,
        ledger: None,
        ledger_zh: None,
        steps: None,
        error: None,
    };
    keep(&store, variant, scenario, &running).await;
    tokio::spawn(async move {
        let way = explore(variant, scenario, &target).await;
        keep(&store, variant, scenario, &way).await;
    });
    Ok(running)
}

/// Runs `stocklock explore --target` on the cell.
async fn explore(variant: Variant, scenario: Scenario, target: &Target) -> AnyWay {
    let failed = |error: String| AnyWay {
        state: "failed".to_owned(),
        schedules: 0,
        found: None,
        ledger: None,
        ledger_zh: None,
        steps: None,
        error: Some(error),
    };
    let schedules = SCHEDULES.to_string();
    let args = [
        "explore",
        "--variant",
        variant.name(),
        "--scenario",
        scenario.name(),
        "--schedules",
        &schedules,
        "--target",
        &target.url,
        "--admin-token",
        &target.admin_token,
        "--redis-url",
        &target.redis_url,
    ];
    match crate::harness::child::json_of::<Explored>(&args).await {
        Ok(explored) => AnyWay {
            state: "done".to_owned(),
            schedules: explored.schedules,
            found: Some(explored.found.is_some()),
            ledger: explored.found.as_ref().map(|f| f.ledger.clone()),
            ledger_zh: explored.found.as_ref().map(|f| f.ledger_zh.clone()),
            steps: explored.found.as_ref().map(|f| f.steps.len()),
            error: None,
        },
        Err(error) => failed(error),
    }
}
