//! The `lua-batch` rows. `lua-batch` is the `lua` script sent once for
//! every buyer of a SKU who queued at an instance while its previous call
//! was in flight; these rows ask what that gains and what it costs:
//!
//! - `lua-batch-vs-healthz` and `lua-batch-vs-lua`: its rate against
//!   `/healthz` and against `lua` through the same nginx, the sides taking
//!   turns at going first (the two rows share their `lua-batch` runs),
//!   each side with what Redis spent per answer, each process's CPU per
//!   answer and its 99th percentile latency;
//! - `lua-batch-latency-c1`: the median latency of `lua-batch` and `lua`
//!   with one request in flight, where no batch ever forms and a buyer can
//!   only lose by the queue.
//!
//! The goals are printed beside the figures, never checked; the
//! two rate rows carry none (see [`super::bare::THROUGHPUT_UNJUDGED`]):
//! what batching saves is judged in CPU per answer, by
//! `lua-batch-cpu-vs-bare`.

use super::report::{LatencyAtOne, LuaBatchReport};
use super::side::{all_200, print_cpu, quantile_us, usec_text};
use super::*;

/// `lua-batch`'s p99 at most this many times `lua`'s, ...
const GOAL_P99_RATIO: f64 = 1.0;
/// ... and with one request in flight, its median latency at most this
/// many microseconds above `lua`'s.
const GOAL_C1_DIFFERENCE_US: f64 = 50.0;

impl Bench {
    /// The `lua-batch` rows that `--rows` asks for (all three by default).
    pub(super) async fn lua_batch(&mut self) -> anyhow::Result<()> {
        let vs_healthz = self.wants(RowName::LuaBatchVsHealthz);
        let vs_lua = self.wants(RowName::LuaBatchVsLua);
        let at_one = self.wants(RowName::LuaBatchLatencyC1);
        let batch_path = format!("/deductStock/lua-batch?sku={BATCH_SKU}");
        let lua_path = format!("/deductStock/lua?sku={LUA_SKU}");
        if !(vs_healthz || vs_lua || at_one) {
            return Ok(());
        }
        // A stack of an older build does not know the variant.
        let probe = self.client.deduct(&batch_path).await;
        if probe.status != 200 {
            let why = format!(
                "the stack did not sell lua-batch (HTTP {}): a build without the variant?",
                probe.status
            );
            for (wanted, row) in [
                (vs_healthz, "lua-batch-vs-healthz"),
                (vs_lua, "lua-batch-vs-lua"),
                (at_one, "lua-batch-latency-c1"),
            ] {
                if wanted {
                    self.skip(row, &why);
                }
            }
            return Ok(());
        }
        let mut report = LuaBatchReport {
            sides: Vec::new(),
            p99_ratio: None,
            concurrency_1: None,
        };
        if vs_healthz || vs_lua {
            self.batch_rates(&batch_path, &lua_path, vs_healthz, vs_lua, &mut report)
                .await?;
        }
        if at_one {
            self.batch_latency_at_one(&batch_path, &lua_path, &mut report)
                .await?;
        }
        self.report.lua_batch = Some(report);
        Ok(())
    }

    /// Rows `lua-batch-vs-healthz` and `lua-batch-vs-lua` (those asked
    /// for), from one set of rounds: `lua-batch`, then `lua`, then
    /// `/healthz`, each round started by the next side in turn.
    async fn batch_rates(
        &mut self,
        batch_path: &str,
        lua_path: &str,
        vs_healthz: bool,
        vs_lua: bool,
        report: &mut LuaBatchReport,
    ) -> anyhow::Result<()> {
        let mut names = vec!["lua-batch"];
        let mut paths = vec![batch_path.to_owned()];
        if vs_lua {
            names.push("lua");
            paths.push(lua_path.to_owned());
        }
        if vs_healthz {
            names.push("/healthz");
            paths.push("/healthz".to_owned());
        }
        let watched = self.watched().await?;
        let (rounds, sides) = self.in_turn(&paths, &watched).await?;
        let cores = cpu::cores();
        report.sides = sides
            .into_iter()
            .zip(&names)
            .map(|(side, name)| side.cost(name, &watched, cores))
            .collect();
        let batch = &report.sides[0];
        let redis_usec = |side: &report::SideCost| usec_text(side.redis_usec_per_answer);
        // Answers over calls: the buyers one call of the script sold to, on average.
        let per_call = |side: &report::SideCost| {
            if side.evalsha_calls > 0 {
                format!("{:.1}", side.answers as f64 / side.evalsha_calls as f64)
            } else {
                "-".to_owned()
            }
        };
        let against = |i: usize| -> Vec<[f64; 2]> {
            rounds.iter().map(|round| [round[0], round[i]]).collect()
        };
        let mut rows = Vec::new();
        if vs_healthz {
            let healthz = names.len() - 1;
            rows.push(
                Row::new(
                    "lua-batch-vs-healthz",
                    ["lua-batch", "/healthz"],
                    against(healthz),
                    None,
                )
                .with_note(format!(
                    "Redis per lua-batch answer (EVALSHA usec over the answers, median): {}; \
                     answers per EVALSHA call: {}",
                    redis_usec(batch),
                    per_call(batch)
                )),
            );
        }
        if vs_lua {
            let lua = &report.sides[1];
            let ratio = batch.p99_us / lua.p99_us;
            rows.push(
                Row::new(
                    "lua-batch-vs-lua",
                    ["lua-batch", "lua"],
                    against(1),
                    None,
                )
                .with_note(format!(
                    "p99 latency at {} connections (median of the runs): lua-batch {:.0} us vs lua {:.0} us, \
                     ratio {ratio:.2} (goal <= {GOAL_P99_RATIO:.2}); Redis per answer (EVALSHA usec over \
                     the answers, median): lua-batch {} vs lua {}; answers per EVALSHA call: {} vs {}",
                    self.config.concurrency,
                    batch.p99_us,
                    lua.p99_us,
                    redis_usec(batch),
                    redis_usec(lua),
                    per_call(batch),
                    per_call(lua)
                )),
            );
            report.p99_ratio = Some(ratio);
        }
        for row in rows {
            self.add(row);
        }
        print_cpu(&report.sides);
        Ok(())
    }

    /// Row `lua-batch-latency-c1`: each side's median latency with one
    /// request in flight, the sides alternating which goes first.
    async fn batch_latency_at_one(
        &mut self,
        batch_path: &str,
        lua_path: &str,
        report: &mut LuaBatchReport,
    ) -> anyhow::Result<()> {
        let mut runs = Vec::new();
        for run in 0..self.config.runs {
            let mut pair = [0.0; 2];
            let order = if run % 2 == 0 { [0, 1] } else { [1, 0] };
            for i in order {
                let path = [batch_path, lua_path][i];
                let tally = self.ours_at(path, 1).await?;
                all_200(path, &tally)?;
                pair[i] = quantile_us(&tally, 0.5);
            }
            runs.push(pair);
        }
        let row = Row::new("lua-batch-latency-c1", ["lua-batch", "lua"], runs, None).in_unit("us");
        let at_one = LatencyAtOne {
            lua_batch_median_us: row.ours,
            lua_median_us: row.theirs,
            difference_us: row.ours - row.theirs,
        };
        self.add(row.with_note(format!(
            "median latency with one request in flight (median of the runs): lua-batch {:.0} us vs lua {:.0} us, \
             difference {:+.0} us (goal: at most {GOAL_C1_DIFFERENCE_US:.0} us more)",
            at_one.lua_batch_median_us, at_one.lua_median_us, at_one.difference_us
        )));
        report.concurrency_1 = Some(at_one);
        Ok(())
    }
}
