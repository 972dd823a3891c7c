//! The rows against the bare route, `GET /bench/bare`: one EVALSHA of a
//! bare decrement (DECR + HINCRBY) and nothing else, served only by
//! instances started with `--bench-bare`. It is the cheapest answer that
//! still makes one Redis round trip, so it is the reference a recorded
//! sale is measured against:
//!
//! - `lua-vs-bare`: `lua`'s rate against the bare route's, through the
//!   same nginx (reported, not judged: see [`THROUGHPUT_UNJUDGED`]);
//! - `lua-cpu-vs-bare` and `lua-batch-cpu-vs-bare`: what an answer cost
//!   the instances and Redis together in CPU time, each side's median over
//!   its runs, `lua` (goal: at most 1.3 times the bare route's) and
//!   `lua-batch` (at most as much as the bare route's), with what
//!   redis-server spent per `lua-batch` buyer (goal: at most 3 µs).
//!
//! The sides (`lua`, bare, and `lua-batch` when its row is asked for) run
//! in turn, each round started by the next side. Around each it measures
//! what Redis spent per answer (EVALSHA's `usec`) and each process's CPU
//! per answer.

use super::report::{BareComparison, SideCost};
use super::side::{print_cpu, usec_text};
use super::*;

/// The SKU name the bare route counts under (its keys are its own:
/// `bench_bare:{bench-bare}`, never a SKU's stock).
const BARE_SKU: &str = "bench-bare";

/// The goals the issue set, in CPU per answer of the instances and Redis:
/// `lua` at most this many times the bare route's, ...
const GOAL_LUA_CPU: f64 = 1.3;
/// ... `lua-batch` at most this many times, ...
const GOAL_BATCH_CPU: f64 = 1.0;
/// ... and redis-server's CPU per `lua-batch` buyer at most this many µs.
const GOAL_REDIS_PER_BATCH_BUYER_US: f64 = 3.0;

/// Why the rows of requests per second through nginx carry no goal here.
pub(super) const THROUGHPUT_UNJUDGED: &str = "rows in req/s through nginx are reported, not judged: \
    nginx and the generator spend the same CPU on every answer whatever the sale does, and on a \
    machine whose cores they share with the instances and Redis a rate cannot show what a sale \
    saves; the rows in us of CPU per answer (instances + Redis) judge that";

impl Bench {
    /// The rows against the bare route that `--rows` asks for.
    pub(super) async fn against_bare(&mut self) -> anyhow::Result<()> {
        let rate = self.wants(RowName::LuaVsBare);
        let lua_cpu = self.wants(RowName::LuaCpuVsBare);
        let batch_cpu = self.wants(RowName::LuaBatchCpuVsBare);
        if !(rate || lua_cpu || batch_cpu) {
            return Ok(());
        }
        let bare_path = format!("/bench/bare?sku={BARE_SKU}");
        let (status, _) = self.client.get(&bare_path).await;
        if status != 200 {
            let why = format!(
                "the stack does not serve /bench/bare (HTTP {status}): start it with `up --bench-bare` (or each instance with `serve --bench-bare`)"
            );
            for (wanted, row) in [
                (rate, "lua-vs-bare"),
                (lua_cpu, "lua-cpu-vs-bare"),
                (batch_cpu, "lua-batch-cpu-vs-bare"),
            ] {
                if wanted {
                    self.skip(row, &why);
                }
            }
            return Ok(());
        }
        let mut names = vec!["lua", "bare"];
        let mut paths = vec![format!("/deductStock/lua?sku={LUA_SKU}"), bare_path];
        if batch_cpu {
            names.push("lua-batch");
            paths.push(format!("/deductStock/lua-batch?sku={BATCH_SKU}"));
        }
        let watched = self.watched().await?;
        // Every round starts with the next side.
        let (rounds, sides) = self.in_turn(&paths, &watched).await?;
        let cores = cpu::cores();
        let sides: Vec<SideCost> = sides
            .into_iter()
            .zip(&names)
            .map(|(side, name)| side.cost(name, &watched, cores))
            .collect();
        if rate {
            let runs = rounds.iter().map(|round| [round[0], round[1]]).collect();
            let note = format!(
                "Redis per answer (EVALSHA usec_per_call, median): lua {} vs bare {}; \
                 bare = GET /bench/bare: one EVALSHA (DECR + HINCRBY) on keys of its own",
                usec_text(sides[0].redis_usec_per_call),
                usec_text(sides[1].redis_usec_per_call),
            );
            self.add(Row::new("lua-vs-bare", ["lua", "bare"], runs, None).with_note(note));
        }
        if lua_cpu {
            self.add(cpu_row(
                "lua-cpu-vs-bare",
                &sides[0],
                &sides[1],
                GOAL_LUA_CPU,
            ));
        }
        if batch_cpu {
            let batch = &sides[2];
            let redis_per_buyer = batch.redis_cpu_usec_per_answer();
            let per_call = if batch.evalsha_calls > 0 {
                format!("{:.1}", batch.answers as f64 / batch.evalsha_calls as f64)
            } else {
                "-".to_owned()
            };
            let row = cpu_row("lua-batch-cpu-vs-bare", batch, &sides[1], GOAL_BATCH_CPU);
            let note = format!(
                "{}; redis-server CPU per lua-batch buyer {} (goal <= {GOAL_REDIS_PER_BATCH_BUYER_US:.0} us), \
                 {per_call} buyers per call",
                row.note.clone().unwrap_or_default(),
                usec_text(redis_per_buyer)
            );
            self.add(row.with_note(note));
        }
        print_cpu(&sides);
        self.report.lua_vs_bare = Some(BareComparison { sides });
        Ok(())
    }
}

/// A row of CPU per answer of the instances and Redis together: `ours`
/// against the bare route's, each run's pair as measured in its round,
/// with a ceiling as its goal.
fn cpu_row(name: &str, ours: &SideCost, bare: &SideCost, goal: f64) -> Row {
    let runs = ours
        .stack_cpu_usec_runs
        .iter()
        .zip(&bare.stack_cpu_usec_runs)
        .map(|(ours, theirs)| [*ours, *theirs])
        .collect();
    let split = |side: &SideCost| {
        let of = |kind: &str| {
            side.cpu
                .processes
                .iter()
                .find(|share| share.kind == kind)
                .and_then(|share| share.cpu_usec_per_answer)
        };
        format!(
            "{}: instances {} + redis-server {}",
            side.side,
            usec_text(of("instances")),
            usec_text(of("redis"))
        )
    };
    Row::new(name, [ours.side.as_str(), "bare"], runs, Some(goal))
        .in_unit("us CPU")
        .at_most()
        .with_note(format!(
            "CPU per answer of the instances and Redis, each run's own (over all runs: {}; {})",
            split(ours),
            split(bare)
        ))
}
