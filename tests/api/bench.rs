//! `stocklock bench --json`, run as a user runs it, briefly, against a real
//! stack. Its figures depend on the machine: the test checks the file's
//! shape and arithmetic and that each figure was measured, never how fast
//! anything was.

use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

use crate::helpers::Stack;

#[tokio::test]
async fn bench_json_has_every_row_its_medians_ratios_redis_time_and_cpu_shares() {
    // --bench-bare: the instances serve the baseline of row lua-vs-bare.
    let stack = Stack::start_with(2, None, &["--bench-bare"]).await;
    let redis_url = stack.redis_url.clone().expect("up started its own Redis");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let child = Command::new(env!("CARGO_BIN_EXE_stocklock"))
        .arg("bench")
        .args(["--target", &stack.url, "--redis-url", &redis_url])
        .args(["--admin-token", &stack.token])
        .args(["--runs", "1", "--duration", "500ms", "--concurrency", "16"])
        .arg("--json")
        .arg(&json)
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run stocklock bench");
    let generator_pid = child.id().expect("the bench runs");
    let output = tokio::time::timeout(Duration::from_secs(180), child.wait_with_output())
        .await
        .expect("stocklock bench did not finish within 180 s")
        .expect("stocklock bench's output");
    let table = String::from_utf8_lossy(&output.stdout);
    eprintln!("{table}{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "stocklock bench failed");

    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["runs_per_side"], 1);
    assert_eq!(report["concurrency"], 16);
    assert_eq!(report["target"], stack.url.as_str());
    assert!(report["machine"]["cores"].as_u64().unwrap() >= 1);

    // Every row, unless oha is missing here (then it says it skipped it).
    let mut expected = vec![
        "lua-vs-healthz",
        "lua-vs-bare",
        "lua-cpu-vs-bare",
        "lua-batch-cpu-vs-bare",
        "lua-batch-vs-healthz",
        "lua-batch-vs-lua",
        "lua-batch-latency-c1",
        "timeline-cost",
        "sold-out-vs-healthz",
        "watchdog-vs-handoff-ceiling",
        "redlock-vs-watchdog",
    ];
    let skipped: Vec<&str> = report["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["row"].as_str().unwrap())
        .collect();
    // The stack runs without orders (nor PostgreSQL): their rows say so.
    let without_postgres = ["orders-vs-sales", "pg-update-vs-lua", "pg-update-many-skus"];
    if stocklock::os::find_program("oha").is_some() {
        expected.insert(0, "generator-vs-oha");
        assert_eq!(skipped, without_postgres);
    } else {
        let mut all = vec!["generator-vs-oha"];
        all.extend(without_postgres);
        assert_eq!(skipped, all);
    }
    let why = |row: &str| {
        let skip = report["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["row"] == row);
        skip.unwrap()["why"].as_str().unwrap().to_owned()
    };
    assert!(
        why("orders-vs-sales").contains("no orders"),
        "{}",
        why("orders-vs-sales")
    );
    let pg = why("pg-update-vs-lua");
    assert!(pg.contains("503") && pg.contains("PostgreSQL"), "{pg}");
    let rows = report["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["row"].as_str().unwrap()).collect();
    assert_eq!(names, expected);
    for row in rows {
        let name = row["row"].as_str().unwrap();
        assert!(
            table.lines().any(|line| line.starts_with(name)),
            "the table has no {name} line"
        );
        let runs = row["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 1, "{name}");
        let pair: Vec<f64> = runs[0]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let (ours, theirs) = (
            row["ours"].as_f64().unwrap(),
            row["theirs"].as_f64().unwrap(),
        );
        // One run per side: the medians are that run's pair.
        assert_eq!(pair, [ours, theirs], "{name}");
        assert!(ours > 0.0 && theirs > 0.0, "{name}: {row}");
        let ratio = row["ratio"].as_f64().unwrap();
        assert!(
            (ratio - ours / theirs).abs() <= 1e-12 * ratio.abs(),
            "{name}: ratio {ratio} is not {ours} / {theirs}"
        );
        let unit = match name {
            "lua-batch-latency-c1" => "us",
            "lua-cpu-vs-bare" | "lua-batch-cpu-vs-bare" => "us CPU",
            _ => "req/s",
        };
        assert_eq!(row["unit"], unit, "{name}");
        // Rates through nginx are reported, not judged; costs have a ceiling.
        let goal = match name {
            "lua-cpu-vs-bare" => Some(1.3),
            "lua-batch-cpu-vs-bare" => Some(1.0),
            "generator-vs-oha" => Some(1.0),
            "timeline-cost" => Some(0.97),
            "sold-out-vs-healthz" => Some(0.95),
            "watchdog-vs-handoff-ceiling" => Some(0.8),
            _ => None,
        };
        assert_eq!(row["goal"].as_f64(), goal, "{name}");
        assert_eq!(
            row["goal_at_most"].as_bool(),
            Some(unit == "us CPU"),
            "{name}"
        );
        assert_eq!(row["sides"].as_array().unwrap().len(), 2);
    }

    redis_time_per_sale_is_measured(&report);

    // A CPU share for each kind of process, and the right processes.
    let cpu = &report["cpu_during_lua"];
    assert!(cpu["seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(cpu["answers"], report["redis_per_lua_sale"]["lua_answers"]);
    let shares = cpu["processes"].as_array().unwrap();
    let pids = |kind: &str| -> Vec<u64> {
        let share = shares
            .iter()
            .find(|s| s["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} share: {cpu}"));
        for figure in ["percent_of_one_core", "cpu_usec_per_answer"] {
            let value = share[figure].as_f64();
            assert!(value.is_some_and(|v| v >= 0.0), "{kind}: {share}");
        }
        share["pids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_u64().unwrap())
            .collect()
    };
    let mut instances: Vec<u64> = stack.instances.iter().map(|i| u64::from(i.pid)).collect();
    instances.sort_unstable();
    let mut found = pids("instances");
    found.sort_unstable();
    assert_eq!(found, instances);
    assert!(pids("nginx").contains(&u64::from(stack.nginx_pid)));
    assert_eq!(pids("redis"), [u64::from(stack.redis_pid.unwrap())]);
    assert_eq!(pids("generator"), [u64::from(generator_pid)]);
    assert_eq!(shares.len(), 4);
    assert!(cpu["idle_percent_of_one_core"].as_f64().unwrap() >= 0.0);
    assert!(cpu["everything_else_percent_of_one_core"].as_f64().unwrap() >= 0.0);
    assert!(table.contains("CPU during the lua sides"));

    // The rows against the bare route: Redis's time and each process's
    // CPU per answer, on every side, each side's answers its own.
    let sides = report["lua_vs_bare"]["sides"].as_array().unwrap();
    assert_eq!(sides.len(), 3);
    for (side, name) in sides.iter().zip(["lua", "bare", "lua-batch"]) {
        assert_eq!(side["side"], name);
        assert!(
            side["redis_usec_per_call"].as_f64().unwrap() > 0.0,
            "{side}"
        );
        assert_eq!(side["redis_runs"].as_array().unwrap().len(), 1, "{side}");
        let answers = side_answered_and_cost(side, name, &table);
        if name == "lua-batch" {
            assert!(side["evalsha_calls"].as_u64().unwrap() <= answers, "{side}");
        } else {
            assert!(side["evalsha_calls"].as_u64().unwrap() >= answers, "{side}");
        }
    }
    cpu_rows_are_each_runs_instances_and_redis(&report, sides, &table);
    eprintln!(
        "lua-vs-bare (printed, not asserted): {}",
        rows.iter().find(|r| r["row"] == "lua-vs-bare").unwrap()
    );

    lua_batch_rows_are_measured(&stack, &report, &table).await;

    let memory = report["instances"].as_array().unwrap();
    assert_eq!(memory.len(), 2);
    for instance in memory {
        assert!(
            instance["resident_mib"].as_f64().unwrap() > 0.0,
            "{instance}"
        );
    }
    stack.stop().await;
}

/// Row `orders-vs-sales` on a stack with orders: each run sold its SKU
/// out with `lua-stream`, every sale became its order, and the row's
/// figures are the books' (orders per second, lag) and the run's sale rate.
#[tokio::test]
async fn the_orders_row_measures_the_pipeline_behind_the_sales() {
    if !stocklock::up::postgres::installed() {
        crate::helpers::missing_tool("PostgreSQL is not installed (scripts/deps.sh postgresql)");
        return;
    }
    let stack = Stack::start_with(2, None, &["--orders", "on"]).await;
    let (_, report) = bench(
        &stack,
        &[
            "--rows",
            "orders-vs-sales",
            "--runs",
            "1",
            "--concurrency",
            "16",
        ],
        Duration::from_secs(180),
    )
    .await;
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row["row"], "orders-vs-sales");
    assert_eq!(row["goal"], 0.9);
    let [orders_per_s, sales_per_s] = [0, 1].map(|i| row["runs"][0][i].as_f64().unwrap());
    assert!(orders_per_s > 0.0 && sales_per_s > 0.0, "{row}");
    // Every unit sold became its order, in this run's epoch.
    let state = stack.client.state("bench-orders").await.unwrap();
    assert_eq!((state.sold, state.remaining), (20_000, 0), "{state:?}");
    let books = stack.client.orders("bench-orders").await.unwrap();
    assert_eq!(books.summary.reserved, 20_000, "{:?}", books.summary);
    assert_eq!(books.summary.orders_per_s, Some(orders_per_s));
    let lags = &report["orders_vs_sales"];
    assert_eq!(
        lags["lag_p99_ms"].as_f64(),
        books.summary.lag_p99_ms,
        "{lags}"
    );
    assert_eq!(lags["lag_runs_ms"].as_array().unwrap().len(), 1, "{lags}");
    stack.stop().await;
}

/// `up --no-chaos` takes CONFIG away from Redis's clients: the bench still
/// measures Redis's time per sale there, from the counters' differences.
/// Without `--bench-bare` the lua-vs-bare row is skipped, naming the flag.
#[tokio::test]
async fn a_stack_without_chaos_is_measured_and_without_the_bare_route_its_row_is_skipped() {
    let stack = Stack::start_with(1, None, &["--no-chaos", "--redlock", "0"]).await;
    let (printed, report) = bench(
        &stack,
        &[
            "--rows",
            "lua-vs-healthz,lua-vs-bare",
            "--runs",
            "1",
            "--duration",
            "300ms",
            "--concurrency",
            "8",
        ],
        Duration::from_secs(120),
    )
    .await;
    let rows: Vec<&str> = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["row"].as_str().unwrap())
        .collect();
    assert_eq!(rows, ["lua-vs-healthz"]);
    redis_time_per_sale_is_measured(&report);
    let skipped = report["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0]["row"], "lua-vs-bare");
    let why = skipped[0]["why"].as_str().unwrap();
    assert!(why.contains("--bench-bare"), "{why}");
    assert!(printed.contains("lua-vs-bare: skipped"), "{printed}");
    assert!(report["lua_vs_bare"].is_null());
    assert!(report["lua_batch"].is_null(), "rows not asked for");
    stack.stop().await;
}

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

/// The CPU rows: each run's pair is the instances' and Redis's CPU per
/// answer of that run, one run per side here, so the pair is the sides'
/// own figures, and over the side's windows it is the sum of the two
/// kinds' shares; the reason the rate rows are not judged is printed and
/// written.
fn cpu_rows_are_each_runs_instances_and_redis(report: &Value, sides: &[Value], table: &str) {
    let stack = |side: &Value| {
        let usec = |kind: &str| {
            side["cpu"]["processes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|share| share["kind"] == kind)
                .unwrap()["cpu_usec_per_answer"]
                .as_f64()
                .unwrap()
        };
        usec("instances") + usec("redis")
    };
    for side in sides {
        let runs = side["stack_cpu_usec_runs"].as_array().unwrap();
        assert_eq!(runs.len(), 1, "{side}");
        let run = runs[0].as_f64().unwrap();
        assert!(run > 0.0, "{side}");
        assert_eq!(side["stack_cpu_usec_per_answer"].as_f64(), Some(run));
        // One run: its window is the side's whole window.
        assert!((run - stack(side)).abs() <= 1e-9 * run, "{side}");
    }
    let row = |name: &str| row_named(report, name);
    for (name, ours) in [("lua-cpu-vs-bare", 0), ("lua-batch-cpu-vs-bare", 2)] {
        let cpu = row(name);
        assert_eq!(
            cpu["runs"][0],
            serde_json::json!([
                sides[ours]["stack_cpu_usec_runs"][0],
                sides[1]["stack_cpu_usec_runs"][0]
            ]),
            "{name}"
        );
        assert!(table.contains(&format!("{name} ")), "{name}");
    }
    let why = report["throughput_not_judged"].as_str().unwrap();
    assert!(why.contains("not judged") && table.contains(why), "{why}");
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

/// The `lua-batch` rows: every side measured (its answers, Redis's time
/// and each process's CPU per answer, its p99), the two rate rows sharing
/// their `lua-batch` runs, the latencies with one request in flight; and
/// the `lua-batch` sides were what they say: every buyer went through the
/// variant's batches and sold on the bench's SKU.
async fn lua_batch_rows_are_measured(stack: &Stack, report: &Value, table: &str) {
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
