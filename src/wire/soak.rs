//! `stocklock soak`'s shapes: its live status (kept in Redis for the
//! dashboard's `/soak` page) and its report (`--json FILE`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::HistoryJudgement;

/// Where a running soak keeps its status, rewritten every second (with a
/// TTL, so a soak that died leaves none for long).
pub const SOAK_STATUS_KEY: &str = "stocklock:soak:status";

/// A running (or just finished) soak, as the dashboard shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SoakStatus {
    pub seed: u64,
    /// The minutes of faults asked for.
    pub minutes: f64,
    /// Seconds since the load started.
    pub elapsed_s: f64,
    /// `faults` (load and faults), `recovering` (faults stopped, every SKU
    /// must sell again), `judging`, `done`.
    pub phase: String,
    /// Requests sent (every attempt, retries included).
    pub requests: u64,
    pub sold: u64,
    /// Requests whose first answer was `unknown` (or none), and how many of
    /// them a retry with the same id has settled.
    pub unknowns: u64,
    pub unknowns_resolved: u64,
    /// Faults struck so far, by kind.
    pub faults: BTreeMap<String, u64>,
    /// Violations of a safe claim found so far, by variant.
    pub violations: BTreeMap<String, u64>,
    /// The last fault struck: `12.3 s kill-instance b`.
    pub last_fault: Option<String>,
    /// Milliseconds since the Unix epoch when this was written.
    pub updated_ms: u64,
}

/// `stocklock soak --json FILE`: the whole report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SoakReport {
    pub seed: u64,
    pub minutes: f64,
    /// The fault kinds the schedule drew from.
    pub kinds: Vec<String>,
    /// `--cycle`: the kinds in a fixed order instead of drawn at random.
    pub cycle: bool,
    /// The stack's Redis kept every acknowledged write across restarts.
    pub persist: bool,
    /// Seconds of the whole run (load, faults, recovery and judging).
    pub elapsed_s: f64,
    pub requests: u64,
    pub sold: u64,
    pub faults: Vec<SoakFault>,
    /// Faults struck, by kind.
    pub faults_by_kind: BTreeMap<String, u64>,
    pub variants: Vec<SoakVariant>,
    pub violations: Vec<SoakViolation>,
    /// Per fault kind: how long after it healed each variant sold again.
    pub recovery: Vec<Recovery>,
    /// Unknown answers and how they were settled.
    pub unknowns: Unknowns,
    /// Redis at the end, once the faults stopped.
    pub redis: RedisAtEnd,
    /// Order SKUs whose orders matched their ledger.
    pub orders_matched: u64,
    /// Order SKUs whose orders did not match their ledger (claimed or not).
    pub orders: Vec<SoakOrders>,
    /// `--history FILE`: where every round's history was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_file: Option<String>,
    /// The longest a round waited, once it ended, to be judged (the grace
    /// after the faults that struck it included): how far behind the load
    /// the judges ran.
    #[serde(default)]
    pub judged_late_s: f64,
}

/// One fault the nemesis struck.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SoakFault {
    pub kind: String,
    /// What it hit (`instance b`, `redlock node 3`, `redis`, a SKU).
    pub target: String,
    /// Seconds from the start of the load.
    pub at_s: f64,
    /// When it was healed (the process continued or restarted, the
    /// partition lifted); equal to `at_s` for a fault that is over at once.
    pub healed_s: f64,
    /// Empty when it struck; why not otherwise (the stack refused it).
    pub error: String,
}

/// One variant over the whole soak.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SoakVariant {
    pub variant: String,
    /// SKUs sold through (a fresh one each round).
    pub rounds: u64,
    pub requests: u64,
    pub sold: u64,
    /// Sales no stock backs or units sold twice, in rounds whose faults'
    /// claims allow it: counted, not hidden.
    pub oversold_allowed: i64,
    /// Rounds that stopped selling with stock left (a lock nobody holds),
    /// where a fault that struck claims it.
    pub deadlocks_allowed: u64,
    /// Order SKUs with units that no order names, where the claims allow
    /// losing units (each listed in the report's `orders`).
    pub lost_units_allowed: i64,
    /// Violations of a claim.
    pub violations: u64,
    /// Rounds by the history checker's verdict of what their buyers were
    /// told (`linearizable`, `not_linearizable`, `unsafe`, `undecided`).
    #[serde(default)]
    pub history: BTreeMap<String, u64>,
    /// Milliseconds the history checker took, over all the rounds, and
    /// for the slowest round.
    #[serde(default)]
    pub history_ms: u64,
    #[serde(default)]
    pub history_ms_max: u64,
}

/// A claim broken: a reproduction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SoakViolation {
    pub variant: String,
    pub sku: String,
    /// What broke (`oversold 2 where every claim is safe`, ...).
    pub what: String,
    /// The round's window, seconds from the start of the load.
    pub from_s: f64,
    pub to_s: f64,
    /// The faults that struck in and around that window.
    pub faults: Vec<String>,
    /// The SKU's requests around it, one line each.
    pub history: Vec<String>,
    /// The history checker's verdict of the round, beside the soak's own
    /// judge (`disagreement` set when the two disagree on safety); none
    /// for a violation of no round (Redis at the end, recovery).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_check: Option<HistoryJudgement>,
    /// The round's history as its buyers recorded it (JSON Lines, as
    /// `stocklock history check` reads it: the SKU's declaration, every
    /// attempt, the books read after).
    #[serde(default)]
    pub recorded: Vec<String>,
    /// The SKU's timeline, drawn (a self-contained HTML file beside the
    /// report), when one was written.
    pub timeline: Option<String>,
    /// How to play the same fault schedule again.
    pub rerun: String,
}

/// How long after a kind of fault each variant sold again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recovery {
    pub kind: String,
    /// (fault, variant) pairs measured.
    pub count: u64,
    pub p50_ms: u64,
    pub p99_ms: u64,
    pub max_ms: u64,
}

/// Every request whose answer was `unknown` (or that got none), and what
/// retries with its id learned.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Unknowns {
    pub total: u64,
    /// A retry answered `sold` (the first attempt's sale, replayed, or a new one).
    pub sold: u64,
    /// A retry answered sold out or busy: nothing was sold for it.
    pub not_sold: u64,
    /// Never settled: each is a violation.
    pub unresolved: u64,
}

/// Redis at the end.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RedisAtEnd {
    pub used_memory_bytes: u64,
    pub keys: u64,
    /// The most keys the SKUs of the run may need.
    pub keys_allowed: u64,
    /// Lock keys left once the faults stopped (each a claimed deadlock).
    pub locks_left: u64,
    /// Keys by the name before their first `:` (`(soak)`: of a soak SKU).
    #[serde(default)]
    pub kinds: BTreeMap<String, u64>,
}

/// An order SKU's books at the end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SoakOrders {
    pub variant: String,
    pub sku: String,
    /// `stocklock reconcile`'s verdict (`MATCH`, `LOST n`, `LEDGER_LOST`...).
    pub verdict: String,
    /// Whether its variant's claims allow what it shows.
    pub allowed: bool,
}
