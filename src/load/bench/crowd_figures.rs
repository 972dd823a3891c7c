//! What `bench --crowd` measured (the figures the report carries;
//! `crowd.rs` measures them).

use std::collections::BTreeMap;

use serde::Serialize;

/// A variant `--crowd` could not play, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CrowdSkipped {
    pub variant: String,
    pub why: String,
}

/// One variant at one crowd: the medians of its runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CrowdRow {
    pub variant: String,
    pub buyers: usize,
    pub sales_per_s: f64,
    pub attempts_per_s: f64,
    /// Attempts that sold nothing (busy, sold out, unknown, errors), of all.
    pub changed_nothing: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Read from the stack once every run of the variant was played.
    pub oversold: i64,
    /// Each store's CPU per answer, µs (the stores whose address was given).
    pub usec_per_answer: BTreeMap<String, f64>,
    pub runs_sales_per_s: Vec<f64>,
}

/// A goal of the crowd table, judged.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CrowdGoal {
    pub goal: String,
    pub ratio: f64,
    pub at_least: f64,
    pub met: bool,
}

/// What `--crowd` measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CrowdReport {
    pub crowds: Vec<usize>,
    pub rows: Vec<CrowdRow>,
    pub skipped: Vec<CrowdSkipped>,
    pub goals: Vec<CrowdGoal>,
}
