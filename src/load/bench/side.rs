//! One side of a row measured with its costs: its rate, what Redis spent
//! per answer (EVALSHA's counters read before and after the run), each
//! process's CPU per answer, and its 99th percentile latency. The rows
//! measured so (`lua-vs-bare`, and `lua-batch` against `lua` and
//! `/healthz`) run their sides in turn, each side starting a round in its
//! turn, so that no side always runs on a warmer stack.

use super::report::SideCost;
use super::*;

/// What one side measured over its runs.
#[derive(Debug, Default)]
pub(super) struct Side {
    usage: Usage,
    /// Each run's EVALSHA microseconds per call, and per answer.
    per_call: Vec<f64>,
    per_answer: Vec<f64>,
    /// Each run's 99th percentile latency, in microseconds.
    p99_us: Vec<f64>,
    calls: u64,
    answers: u64,
    /// Each run's CPU per answer of the instances and Redis.
    stack_usec: Vec<f64>,
}

impl Side {
    /// The side's costs, named `name`, on a machine of `cores` cores.
    pub(super) fn cost(self, name: &str, watched: &Watched, cores: usize) -> SideCost {
        let median_of = |runs: &Vec<f64>| (!runs.is_empty()).then(|| report::median(runs.clone()));
        SideCost {
            side: name.to_owned(),
            redis_usec_per_call: median_of(&self.per_call),
            redis_usec_per_answer: median_of(&self.per_answer),
            redis_runs: self.per_call,
            evalsha_calls: self.calls,
            answers: self.answers,
            cpu: cpu::shares(watched, &self.usage, cores),
            stack_cpu_usec_per_answer: report::median(self.stack_usec.clone()),
            stack_cpu_usec_runs: self.stack_usec,
            p99_us: report::median(self.p99_us.clone()),
            p99_runs: self.p99_us,
        }
    }
}

impl Bench {
    /// One run of one side: its rate, with Redis's and the CPU's cost and
    /// its p99 added to `side`. Every answer must be a 200 (a sale, the
    /// bare route's count, a health check).
    pub(super) async fn side(
        &mut self,
        path: &str,
        watched: &Watched,
        side: &mut Side,
    ) -> anyhow::Result<f64> {
        self.redis.mark().await?;
        let mut run = Usage::default();
        let tally = self.measured(path, watched, &mut run).await?;
        side.stack_usec
            .push(cpu::shares(watched, &run, cpu::cores()).stack_usec_per_answer());
        side.usage.merge(&run);
        all_200(path, &tally)?;
        if let Some(evalsha) = self.redis.evalsha().await? {
            side.per_call.push(evalsha.usec_per_call);
            side.per_answer
                .push(evalsha.usec as f64 / tally.requests.max(1) as f64);
            side.calls += evalsha.calls;
        }
        side.p99_us.push(quantile_us(&tally, 0.99));
        side.answers += tally.requests;
        Ok(tally.rps())
    }

    /// `--runs` rounds of one run of each of `paths`; round r starts with
    /// side r (mod their number) and goes on in order. Each round's rates
    /// in the order of `paths`, and each side's measurements.
    pub(super) async fn in_turn(
        &mut self,
        paths: &[String],
        watched: &Watched,
    ) -> anyhow::Result<(Vec<Vec<f64>>, Vec<Side>)> {
        let n = paths.len();
        let mut sides: Vec<Side> = (0..n).map(|_| Side::default()).collect();
        let mut rounds = Vec::new();
        for round in 0..self.config.runs {
            let mut rates = vec![0.0; n];
            for k in 0..n {
                let i = (round + k) % n;
                rates[i] = self.side(&paths[i], watched, &mut sides[i]).await?;
            }
            rounds.push(rates);
        }
        Ok((rounds, sides))
    }
}

/// Redis's microseconds, for a row's note ("-" when no script ran).
pub(super) fn usec_text(usec: Option<f64>) -> String {
    usec.map_or("-".to_owned(), |usec| format!("{usec:.1} us"))
}

/// Prints each side's CPU shares under its row.
pub(super) fn print_cpu(sides: &[SideCost]) {
    for side in sides {
        println!(
            "    {}",
            side.cpu.line_for(&format!("the {} sides", side.side))
        );
    }
}

/// Fails unless every answer of the run on `path` was a 200.
pub(super) fn all_200(path: &str, tally: &Tally) -> anyhow::Result<()> {
    if tally.sold != tally.requests {
        bail!(
            "{path}: {} of {} answers were not 200 (sold out {}, busy {}, unknown {})",
            tally.requests - tally.sold,
            tally.requests,
            tally.sold_out,
            tally.busy,
            tally.unknown
        );
    }
    Ok(())
}

/// A latency quantile of the run, in microseconds (0 with no answer).
pub(super) fn quantile_us(tally: &Tally, quantile: f64) -> f64 {
    if tally.latency_us.is_empty() {
        return 0.0;
    }
    tally.latency_us.value_at_quantile(quantile) as f64
}
