//! What `stocklock bench` reports: its rows (two sides, their runs, the
//! medians and their ratio), the table it prints and the JSON file
//! `--json` writes.
//!
//! The file's shapes live here rather than in [`crate::wire`]: nothing but
//! this command writes them, and only readers of the file (the README, the
//! tests, a spreadsheet) read them.

mod row;

pub use row::{Row, table_head};

use serde::Serialize;

use super::cpu::CpuShares;

/// A row that did not run, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Skipped {
    pub row: String,
    pub why: String,
}

/// What Redis spent per `lua` sale: EVALSHA's time per call in `INFO
/// commandstats`, its counters read before each `lua` side and after it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RedisPerSale {
    /// The median over the `lua` sides.
    pub usec_per_call: f64,
    /// Each `lua` side's figure.
    pub runs: Vec<f64>,
    /// EVALSHA calls Redis counted over the `lua` sides ...
    pub evalsha_calls: u64,
    /// ... and the answers the generator got meanwhile: equal when the
    /// sale script was all the EVALSHA there was.
    pub lua_answers: u64,
}

impl RedisPerSale {
    pub fn new(runs: Vec<f64>, evalsha_calls: u64, lua_answers: u64) -> Self {
        Self {
            usec_per_call: median(runs.clone()),
            runs,
            evalsha_calls,
            lua_answers,
        }
    }

    pub fn line(&self) -> String {
        format!(
            "Redis per lua sale: {:.1} us (EVALSHA usec_per_call in INFO commandstats; median, lua sides: {}; {} calls for {} answers)",
            self.usec_per_call,
            self.runs.len(),
            self.evalsha_calls,
            self.lua_answers
        )
    }
}

/// The costs of the rows against the bare route, side by side: `lua`,
/// the bare route, then `lua-batch` when its row ran.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BareComparison {
    pub sides: Vec<SideCost>,
}

/// What one side of a row cost per answer: Redis's time and each process's CPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SideCost {
    /// `lua`, `bare`, `lua-batch` or `/healthz`.
    pub side: String,
    /// The median of EVALSHA's `usec_per_call` over the side's runs
    /// (`None`: no EVALSHA ran): what Redis spent per call, which is per
    /// answer where each answer makes one call.
    pub redis_usec_per_call: Option<f64>,
    /// The median over the side's runs of EVALSHA's microseconds over the
    /// run's answers (`None`: no EVALSHA ran): what Redis spent per answer
    /// even where one call answers many buyers (`lua-batch`).
    pub redis_usec_per_answer: Option<f64>,
    /// Each run's `usec_per_call`.
    pub redis_runs: Vec<f64>,
    /// EVALSHA calls Redis counted over the side's runs, and the answers
    /// the generator got meanwhile (equal where each answer makes one
    /// script call; fewer calls where a call answers a batch).
    pub evalsha_calls: u64,
    pub answers: u64,
    /// Each process's CPU share and CPU per answer during the side's runs.
    pub cpu: CpuShares,
    /// CPU per answer of the instances and Redis together, in
    /// microseconds, each run's own (in the order they ran) ...
    pub stack_cpu_usec_runs: Vec<f64>,
    /// ... and their median.
    pub stack_cpu_usec_per_answer: f64,
    /// The median over the side's runs of each run's 99th percentile
    /// latency, in microseconds, at the bench's concurrency ...
    pub p99_us: f64,
    /// ... and each run's.
    pub p99_runs: Vec<f64>,
}

impl SideCost {
    /// redis-server's CPU per answer, in microseconds (`None`: not watched).
    pub fn redis_cpu_usec_per_answer(&self) -> Option<f64> {
        self.cpu
            .processes
            .iter()
            .find(|share| share.kind == "redis")
            .and_then(|share| share.cpu_usec_per_answer)
    }
}

/// The `lua-batch` rows' measurements.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LuaBatchReport {
    /// The sides of rows `lua-batch-vs-healthz` and `lua-batch-vs-lua`, at
    /// the bench's concurrency: `lua-batch` first, then `lua` and
    /// `/healthz` when their row ran (none when neither ran).
    pub sides: Vec<SideCost>,
    /// Row `lua-batch-vs-lua`'s p99 latencies, `lua-batch`'s over `lua`'s
    /// (a goal of at most 1: no worse); `None` when the row did not run.
    pub p99_ratio: Option<f64>,
    /// Row `lua-batch-latency-c1`: the median latencies at concurrency 1.
    pub concurrency_1: Option<LatencyAtOne>,
}

/// The median latencies of `lua-batch` and `lua` with one request in
/// flight (the medians over the runs of each run's median).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LatencyAtOne {
    pub lua_batch_median_us: f64,
    pub lua_median_us: f64,
    /// `lua-batch`'s minus `lua`'s (a goal of at most 50).
    pub difference_us: f64,
}

/// Row `orders-vs-sales`'s lag from sale to order row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OrdersVsSales {
    /// The medians over the runs of each run's lag p50 and p99, in ms ...
    pub lag_p50_ms: f64,
    pub lag_p99_ms: f64,
    /// ... and each run's `[p50, p99]`.
    pub lag_runs_ms: Vec<[f64; 2]>,
}

/// The machine the bench ran on.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Machine {
    pub cores: usize,
    /// `model name` in /proc/cpuinfo.
    pub cpu: String,
    /// The 1-minute load average when the bench started: how busy the
    /// machine already was.
    pub load_average_at_start: f64,
}

/// An instance behind the target and its resident memory after the rows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InstanceMemory {
    pub instance: String,
    pub pid: u32,
    /// `None`: not readable here (the instance runs elsewhere).
    pub resident_mib: Option<f64>,
}

/// Everything `--json` writes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchReport {
    /// When the bench started (UTC, `YYYY-MM-DD HH:MM UTC`).
    pub date: String,
    pub machine: Machine,
    pub target: String,
    pub concurrency: usize,
    pub seconds_per_run: f64,
    /// How many times each side ran (the medians are over these).
    pub runs_per_side: usize,
    pub rows: Vec<Row>,
    pub skipped: Vec<Skipped>,
    pub redis_per_lua_sale: Option<RedisPerSale>,
    /// Each process's CPU share during the `lua` sides.
    pub cpu_during_lua: Option<CpuShares>,
    /// The rows against the bare route (`lua-vs-bare`, `lua-cpu-vs-bare`,
    /// `lua-batch-cpu-vs-bare`): Redis's time and CPU per answer of each side.
    pub lua_vs_bare: Option<BareComparison>,
    /// The `lua-batch` rows' sides, p99s and latencies at concurrency 1
    /// (`None` when none of them ran).
    pub lua_batch: Option<LuaBatchReport>,
    /// Row `orders-vs-sales`'s lags (`None` when it did not run).
    pub orders_vs_sales: Option<OrdersVsSales>,
    /// The pg-update rows' CPU per answer and latencies, when they ran.
    pub postgres: Option<super::pg_figures::PgFigures>,
    /// `--crowd`'s table (`None` without it).
    pub crowd: Option<super::crowd_figures::CrowdReport>,
    pub instances: Vec<InstanceMemory>,
    /// Why the rows of requests per second through nginx carry no goal.
    pub throughput_not_judged: String,
}

impl BenchReport {
    /// The lines above the table.
    pub fn header(&self) -> String {
        let runs = match &self.crowd {
            Some(crowd) => format!(
                "crowds of {} buyers, {:.1} s per run, runs per crowd: {} (the crowds alternate), medians kept",
                crowd
                    .crowds
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(" and "),
                self.seconds_per_run,
                self.runs_per_side
            ),
            None => format!(
                "concurrency {}, {:.1} s per run, runs per side: {} (the sides alternate), medians compared",
                self.concurrency, self.seconds_per_run, self.runs_per_side
            ),
        };
        format!(
            "stocklock bench: {}, {}, {} cores ({}), load average {:.2} at start\n{runs}",
            self.target,
            self.date,
            self.machine.cores,
            self.machine.cpu,
            self.machine.load_average_at_start,
        )
    }
}

/// The median of some measurements (0 of none).
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// `secs` after the Unix epoch as `YYYY-MM-DD HH:MM UTC` (days to a civil
/// date after Howard Hinnant's `civil_from_days`).
pub fn utc_date(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let (hour, minute) = ((secs % 86_400) / 3600, (secs % 3600) / 60);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02} UTC")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_per_sale_is_the_median_of_the_lua_sides() {
        let per_sale = RedisPerSale::new(vec![14.0, 12.5, 13.0], 300, 300);
        assert_eq!(per_sale.usec_per_call, 13.0);
        assert!(per_sale.line().contains("13.0 us"));
    }

    #[test]
    fn dates_are_civil_utc() {
        assert_eq!(utc_date(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc_date(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(utc_date(1_796_099_999), "2026-12-01 04:39 UTC");
        assert_eq!(utc_date(4_102_444_800), "2100-01-01 00:00 UTC");
    }
}
