//! `stocklock bench --json`, run as a user runs it, briefly, against a real
//! stack. Its figures depend on the machine: the test checks the file's
//! shape and arithmetic and that each figure was measured, never how fast
//! anything was.
//!
//! This file: running the bench and the checks the tests share;
//! `every_row.rs`: every row on a stack with the bare route;
//! `batch_rows.rs`: its `lua-batch` rows; `stacks.rs`: the bench on a
//! stack with orders, and on one without chaos or the bare route.

use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

use crate::helpers::Stack;

mod batch_rows;
mod every_row;
mod stacks;

/// `stocklock bench ARGS --json FILE` against `stack`, as a user runs it,
/// within `bound`: what it printed, and the file it wrote.
pub(crate) async fn bench(stack: &Stack, args: &[&str], bound: Duration) -> (String, Value) {
    let redis_url = stack.redis_url.clone().expect("up started its own Redis");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let output = Command::new(env!("CARGO_BIN_EXE_stocklock"))
        .arg("bench")
        .args(["--target", &stack.url, "--redis-url", &redis_url])
        .args(["--admin-token", &stack.token])
        .args(args)
        .arg("--json")
        .arg(&json)
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(bound, output)
        .await
        .unwrap_or_else(|_| panic!("stocklock bench did not finish within {bound:?}"))
        .expect("stocklock bench's output");
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    eprintln!("{printed}{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "stocklock bench failed");
    let report = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    (printed, report)
}

/// The row of the bench's JSON report called `name`.
fn row_named(report: &Value, name: &str) -> Value {
    report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["row"] == name)
        .unwrap_or_else(|| panic!("no row {name}"))
        .clone()
}

/// A measured side of a row (`name`): it had answers, each process's CPU
/// per answer counted over them, and its CPU line printed under the row.
/// Its answers.
fn side_answered_and_cost(side: &Value, name: &str, table: &str) -> u64 {
    let answers = side["answers"].as_u64().unwrap();
    assert!(answers > 0, "{side}");
    assert_eq!(side["cpu"]["answers"].as_u64(), Some(answers), "{side}");
    for share in side["cpu"]["processes"].as_array().unwrap() {
        assert!(
            share["cpu_usec_per_answer"]
                .as_f64()
                .is_some_and(|v| v >= 0.0),
            "{name}: {share}"
        );
    }
    assert!(table.contains(&format!("CPU during the {name} sides")));
    answers
}

/// Redis's time per sale was measured: every `lua` answer ran the sale
/// script once, so there were at least as many EVALSHA calls as answers.
fn redis_time_per_sale_is_measured(report: &Value) {
    let per_sale = &report["redis_per_lua_sale"];
    assert!(
        per_sale["usec_per_call"].as_f64().unwrap() > 0.0,
        "{per_sale}"
    );
    assert!(per_sale["lua_answers"].as_u64().unwrap() > 0, "{per_sale}");
    assert!(
        per_sale["evalsha_calls"].as_u64().unwrap() >= per_sale["lua_answers"].as_u64().unwrap(),
        "{per_sale}"
    );
}
