//! The bench's `lua-batch` rows, checked in the run of every row.

use serde_json::Value;

use super::{row_named, side_answered_and_cost};
use crate::helpers::Stack;

/// The `lua-batch` rows: every side measured (its answers, Redis's time
/// and each process's CPU per answer, its p99), the two rate rows sharing
/// their `lua-batch` runs, the latencies with one request in flight; and
/// the `lua-batch` sides were what they say: every buyer went through the
/// variant's batches and sold on the bench's SKU.
pub(super) async fn lua_batch_rows_are_measured(stack: &Stack, report: &Value, table: &str) {
    let batch = &report["lua_batch"];
    let sides = batch["sides"].as_array().unwrap();
    let names: Vec<&str> = sides.iter().map(|s| s["side"].as_str().unwrap()).collect();
    assert_eq!(names, ["lua-batch", "lua", "/healthz"], "{batch}");
    for (side, name) in sides.iter().zip(&names) {
        side_answered_and_cost(side, name, table);
        assert!(side["p99_us"].as_f64().unwrap() > 0.0, "{side}");
        assert_eq!(side["p99_runs"].as_array().unwrap().len(), 1, "{side}");
        assert!(table.contains(&format!("CPU during the {name} sides")));
    }
    // Both sales ran their script: Redis's time per answer was measured.
    for side in &sides[..2] {
        assert!(side["evalsha_calls"].as_u64().unwrap() > 0, "{side}");
        assert!(
            side["redis_usec_per_answer"].as_f64().unwrap() > 0.0,
            "{side}"
        );
    }
    let lua = &sides[1];
    assert!(lua["evalsha_calls"].as_u64().unwrap() >= lua["answers"].as_u64().unwrap());
    let ratio = batch["p99_ratio"].as_f64().unwrap();
    let p99 = |i: usize| sides[i]["p99_us"].as_f64().unwrap();
    assert!((ratio - p99(0) / p99(1)).abs() <= 1e-12 * ratio, "{batch}");

    let row = |name: &str| row_named(report, name);
    // One set of rounds: both rows' lua-batch figure is the same run.
    let (vs_healthz, vs_lua) = (row("lua-batch-vs-healthz"), row("lua-batch-vs-lua"));
    assert_eq!(vs_healthz["runs"][0][0], vs_lua["runs"][0][0]);

    let at_one = &batch["concurrency_1"];
    let c1 = row("lua-batch-latency-c1");
    let (ours, theirs) = (c1["ours"].as_f64().unwrap(), c1["theirs"].as_f64().unwrap());
    assert_eq!(
        at_one["lua_batch_median_us"].as_f64(),
        Some(ours),
        "{at_one}"
    );
    assert_eq!(at_one["lua_median_us"].as_f64(), Some(theirs), "{at_one}");
    assert_eq!(
        at_one["difference_us"].as_f64(),
        Some(ours - theirs),
        "{at_one}"
    );

    // Every lua-batch buyer (the probe, the rate sides, the runs at
    // concurrency 1) went through a batch and sold on the bench's SKU.
    let (calls, buyers) = crate::lua_batch::batches(stack).await;
    let sold = stack.client.state("bench-lua-batch").await.unwrap().sold;
    assert_eq!(
        sold, buyers as i64,
        "sold on bench-lua-batch vs buyers batched"
    );
    assert!(buyers > sides[0]["answers"].as_u64().unwrap(), "{buyers}");
    assert!(
        calls > 0 && calls <= buyers,
        "{buyers} buyers in {calls} calls"
    );
    eprintln!(
        "lua-batch rows (printed, not asserted): {vs_healthz}\n{vs_lua}\n{c1}\n\
         p99 ratio {ratio:.2}; {buyers} buyers in {calls} calls"
    );
}
