//! Row `lua-vs-bare`: `lua` sales vs `GET /bench/bare` through the same
//! nginx, alternated. The bare route does one EVALSHA of a bare decrement
//! and nothing else, and only instances started with `--bench-bare` serve
//! it: the row says what a correct sale costs over the cheapest answer
//! that still makes one Redis round trip. Around each side it measures
//! what Redis spent per answer (EVALSHA's `usec_per_call`) and each
//! process's CPU per answer.

use super::report::BareComparison;
use super::side::{Side, print_cpu, usec_text};
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
        // Every other pair runs the bare side first.
        let (rounds, sides) = self.in_turn(&[lua_path, bare_path], &watched).await?;
        let runs = rounds.iter().map(|round| [round[0], round[1]]).collect();
        let cores = cpu::cores();
        let [lua, bare]: [Side; 2] = sides.try_into().expect("two paths, two sides");
        let sides =
            [("lua", lua), ("bare", bare)].map(|(name, side)| side.cost(name, &watched, cores));
        let note = format!(
            "Redis per answer (EVALSHA usec_per_call, median): lua {} vs bare {}; \
             bare = GET /bench/bare: one EVALSHA (DECR + HINCRBY) on keys of its own",
            usec_text(sides[0].redis_usec_per_call),
            usec_text(sides[1].redis_usec_per_call),
        );
        self.add(Row::new("lua-vs-bare", ["lua", "bare"], runs, Some(GOAL)).with_note(note));
        print_cpu(&sides);
        self.report.lua_vs_bare = Some(BareComparison { sides });
        Ok(())
    }
}
