//! Every row of the bench on a stack with the bare route: each row's
//! medians and ratio, Redis's time per sale, each process's CPU share and
//! the CPU rows built from them.

use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

use super::batch_rows::lua_batch_rows_are_measured;
use super::{redis_time_per_sale_is_measured, row_named, side_answered_and_cost};
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
        "classroom-30-vs-1",
    ];
    let skipped: Vec<&str> = report["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["row"].as_str().unwrap())
        .collect();
    // The stack runs without orders (nor PostgreSQL): their rows say so.
    let without_postgres = [
        "orders-vs-sales",
        "pg-update-vs-lua",
        "pg-update-many-skus",
        "pg-update-sync-off-vs-on",
        "pg-batch-vs-update",
    ];
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
    let batch = why("pg-batch-vs-update");
    assert!(
        batch.contains("503") && batch.contains("PostgreSQL"),
        "{batch}"
    );
    let sync = why("pg-update-sync-off-vs-on");
    assert!(sync.contains("--postgres-url"), "{sync}");
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
            "classroom-30-vs-1" => "ms",
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

    // A class of thirty at once beside one seat alone, each step's p95.
    let class = row_named(&report, "classroom-30-vs-1");
    let note = class["note"].as_str().unwrap_or_default();
    assert!(
        note.starts_with("a step's p95 with 30 seats stepping at once: ")
            && note.contains("goal <= 1000 ms"),
        "{class}"
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
