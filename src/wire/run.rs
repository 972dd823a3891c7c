//! A load run's report: what the client counted, what the ledger says,
//! the verdicts of both judges (`stocklock load --json`, the lab's race,
//! the dashboard's runs).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{OrdersCheck, StateSnapshot};

/// Failed requests of a load run, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCounts {
    /// Could not connect (refused, unreachable).
    pub connect: u64,
    /// No answer within the timeout.
    pub timeout: u64,
    /// 5xx answers (502 from nginx, 503 when Redis is away, ...).
    #[serde(rename = "5xx")]
    pub server: u64,
    /// Anything else: another status (400, 404, ...), a broken connection.
    pub other: u64,
}

impl ErrorCounts {
    pub fn total(&self) -> u64 {
        self.connect + self.timeout + self.server + self.other
    }
}

/// Latency quantiles of a run, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyMs {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

/// One variant's load run: what the client counted, what the ledger says,
/// and the verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub variant: String,
    pub sku: String,
    pub requests: u64,
    /// 200s the client received.
    pub sold: u64,
    pub sold_out: u64,
    pub busy: u64,
    /// 503 answers of `unknown` outcome: the write was sent and no answer
    /// came. Not errors: their sales, if any, are in the ledger.
    #[serde(default)]
    pub unknown: u64,
    pub errors: ErrorCounts,
    pub rps: f64,
    pub latency_ms: LatencyMs,
    /// From the ledger after the run.
    pub initial: i64,
    pub remaining: i64,
    pub oversold: i64,
    pub duplicates: i64,
    /// Requests of this run answered by each instance (ledger, after minus before).
    pub per_instance: BTreeMap<String, i64>,
    /// `SAFE`, `OVERSOLD n`, `DUPLICATES n`, `STUCK` or `LEDGER_BROKEN n`,
    /// followed by `, unsold n while m buyers were refused` when stock was
    /// left on the shelf while buyers were turned away.
    pub verdict: String,
    /// Under-selling: stock left while buyers were refused in this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsold: Option<Unsold>,
    /// The variant's expected verdict for a plain race (`/api/variants`).
    pub expected: String,
    /// Set when the client's count of 200s and the ledger's disagree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disagreement: Option<String>,
    /// Set when the verdict contradicts the expectation under this load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contradiction: Option<String>,
    /// An order variant on a stack with orders on: the run's orders,
    /// reconciled with the ledger once the pipeline caught up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orders: Option<OrdersCheck>,
    pub elapsed_s: f64,
    /// Each SKU's numbers after the run, when it was spread over several
    /// (`--skus`); the totals above are their sums.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_sku: Vec<SkuResult>,
    /// With `--history`: the independent judge's verdict of what the
    /// clients of this run were told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryJudgement>,
}

/// The history checker's verdict of a run's SKUs (`stocklock history
/// check`): the worst of them, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryJudgement {
    /// `linearizable`, `not_linearizable`, `unsafe` or `undecided`.
    pub verdict: String,
    pub why: String,
    /// Operations judged, over every SKU of the run.
    pub ops: usize,
    pub elapsed_ms: u64,
    /// Set when the ledger's verdict and this one disagree on safety.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disagreement: Option<String>,
}

/// Stock left on the shelf while buyers were told `busy`: a flash sale
/// that under-sold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unsold {
    /// Units left (the ledger's `remaining`).
    pub left: i64,
    /// Buyers refused (`busy`) during the run.
    pub refused: i64,
}

impl std::fmt::Display for Unsold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unsold {} while {} buyers were refused",
            self.left, self.refused
        )
    }
}

/// One SKU's ledger after a run over many SKUs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkuResult {
    pub sku: String,
    pub initial: i64,
    pub remaining: i64,
    pub sold: i64,
    pub oversold: i64,
    pub duplicates: i64,
}

impl From<&StateSnapshot> for SkuResult {
    fn from(state: &StateSnapshot) -> Self {
        Self {
            sku: state.sku.clone(),
            initial: state.initial,
            remaining: state.remaining,
            sold: state.sold,
            oversold: state.oversold,
            duplicates: state.duplicates,
        }
    }
}

/// `stocklock load --json FILE`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    pub runs: Vec<RunReport>,
}
