//! Row `lua-vs-bare`: `lua` sales vs `GET /bench/bare` through the same
//! nginx, alternated. The bare route does one EVALSHA of a bare decrement
//! and nothing else, and only instances started with `--bench-bare` serve
//! it: the row says what a correct sale costs over the cheapest answer
//! that still makes one Redis round trip. Around each side it measures
//! what Redis spent per answer (EVALSHA's `usec_per_call`) and each
//! process's CPU per answer.

use super::report::{BareComparison, SideCost};
use super::*;

/// The SKU name the bare route counts under (its keys are its own:
/// `bench_bare:{bench-bare}`, never a SKU's stock).
const BARE_SKU: &str = "bench-bare";

/// The goal the issue set: `lua` at least this share of the bare route.
const GOAL: f64 = 0.95;

impl Bench {
    pub(super) async fn lua_vs_bare(&mut self) -> anyhow::Result<()> {
        let bare_path = format!("/bench/bare?sku={BARE_SKU}");
        let (status, _) = self.client.get(&bare_path).await;
        if status != 200 {
            self.skip(
                "lua-vs-bare",
                &format!(
                    "the stack does not serve /bench/bare (HTTP {}): start it with `up --bench-bare` (or each instance with `serve --bench-bare`)",
                    status
                ),
            );
            return Ok(());
        }
        let lua_path = format!("/deductStock/lua?sku={LUA_SKU}");
        let watched = self.watched().await?;
        let mut lua = Side::default();
        let mut bare = Side::default();
        let mut runs = Vec::new();
        for run in 0..self.config.runs {
            // Every other pair runs the bare side first, so that neither
            // side always runs on a warmer stack.
            let pair = if run % 2 == 0 {
                let first = self.side(&lua_path, &watched, &mut lua).await?;
                [first, self.side(&bare_path, &watched, &mut bare).await?]
            } else {
                let first = self.side(&bare_path, &watched, &mut bare).await?;
                [self.side(&lua_path, &watched, &mut lua).await?, first]
            };
            runs.push(pair);
        }
        let cores = cpu::cores();
        let sides = [("lua", lua), ("bare", bare)].map(|(name, side)| SideCost {
            side: name.to_owned(),
            redis_usec_per_call: (!side.per_call.is_empty())
                .then(|| report::median(side.per_call.clone())),
            redis_runs: side.per_call,
            evalsha_calls: side.calls,
            answers: side.answers,
            cpu: cpu::shares(&watched, &side.usage, cores),
        });
        let redis_usec = |side: &SideCost| {
            side.redis_usec_per_call
                .map_or("-".to_owned(), |usec| format!("{usec:.1} us"))
        };
        let note = format!(
            "Redis per answer (EVALSHA usec_per_call, median): lua {} vs bare {}; \
             bare = GET /bench/bare: one EVALSHA (DECR + HINCRBY) on keys of its own",
            redis_usec(&sides[0]),
            redis_usec(&sides[1]),
        );
        self.add(Row::new("lua-vs-bare", ["lua", "bare"], runs, Some(GOAL)).with_note(note));
        for side in &sides {
            println!(
                "    {}",
                side.cpu.line_for(&format!("the {} sides", side.side))
            );
        }
        self.report.lua_vs_bare = Some(BareComparison { sides });
        Ok(())
    }

    /// One run of one side: its rate, with Redis's and the CPU's cost
    /// added to `side`. Every answer must be a 200 (a sale, or the bare
    /// route's count).
    async fn side(
        &mut self,
        path: &str,
        watched: &Watched,
        side: &mut Side,
    ) -> anyhow::Result<f64> {
        self.redis.mark().await?;
        let tally = self.measured(path, watched, &mut side.usage).await?;
        if tally.sold != tally.requests {
            bail!(
                "{path}: {} of {} answers were not 200 (sold out {}, busy {})",
                tally.requests - tally.sold,
                tally.requests,
                tally.sold_out,
                tally.busy
            );
        }
        if let Some(evalsha) = self.redis.evalsha().await? {
            side.per_call.push(evalsha.usec_per_call);
            side.calls += evalsha.calls;
        }
        side.answers += tally.requests;
        Ok(tally.rps())
    }
}

/// What one side measured over its runs.
#[derive(Default)]
struct Side {
    usage: Usage,
    per_call: Vec<f64>,
    calls: u64,
    answers: u64,
}
