//! The dashboard's shapes: the board it draws (sent on `/api/events` and
//! `/api/board`), the instances and runs on it, and a run it starts.

use serde::{Deserialize, Serialize};

use super::{RunReport, StateSnapshot};

/// One instance as the dashboard shows it, from its heartbeat in Redis.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceStatus {
    pub name: String,
    pub pid: u32,
    /// `/deductStock` requests this instance has answered since it started.
    pub requests: u64,
    /// Where the instance listens, to reach it without nginx.
    #[serde(default)]
    pub url: String,
    /// Milliseconds since its last heartbeat.
    pub age_ms: u64,
    /// Heartbeat seen within the last three seconds.
    pub healthy: bool,
}

/// A run started from the dashboard, as every instance sees it (kept in Redis).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunStatus {
    pub id: String,
    /// `running`, `done` or `failed`.
    pub state: String,
    pub variants: Vec<String>,
    /// Requests sent so far, over all variants of the run.
    pub done: u64,
    pub total: u64,
    /// One report per variant once the run is done.
    #[serde(default)]
    pub reports: Vec<RunReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Everything the dashboard draws, sent on `/api/events` and `/api/board`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Board {
    /// Each variant's own SKU (the SKU is the variant's name).
    pub variants: Vec<StateSnapshot>,
    pub instances: Vec<InstanceStatus>,
    pub run: Option<RunStatus>,
    /// Each variant's last "scenarios" run from its card: `{variant: {state, cells, error}}`.
    #[serde(default)]
    pub labs: serde_json::Value,
}

/// `POST /api/admin/run`: a load on some variants, run by the instance that
/// takes it, through the stack's public URL.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// Variant names; empty means all of them ("race all").
    #[serde(default)]
    pub variants: Vec<String>,
    /// Stock each variant's SKU is reset to first.
    pub stock: i64,
    pub requests: u64,
    pub concurrency: usize,
    #[serde(default)]
    pub work_ms: Option<u64>,
    #[serde(default)]
    pub lease_ms: Option<u64>,
    #[serde(default)]
    pub wait_ms: Option<u64>,
}
