//! What the database's rows of `bench` measure beyond their rates (the
//! figures the report carries; `pg.rs` measures them).

use serde::Serialize;

/// What the two rows measured beyond their rates.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PgFigures {
    /// PostgreSQL's CPU per `pg-update` answer on the hot SKU, µs (median
    /// of the runs; `None` without `--postgres-url`).
    pub postgres_usec_per_answer: Option<f64>,
    pub postgres_usec_runs: Vec<f64>,
    /// Redis's CPU per `lua` answer in the same rounds, µs.
    pub redis_usec_per_answer: Option<f64>,
    pub redis_usec_runs: Vec<f64>,
    /// PostgreSQL's CPU per answer with the load spread over many SKUs, µs.
    pub postgres_usec_per_answer_many_skus: Option<f64>,
    /// Each side's 99th percentile latency, µs (medians): pg-update hot,
    /// lua, pg-update over many SKUs.
    pub p99_us: [f64; 3],
}
