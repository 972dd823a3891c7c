//! `stocklock bench`'s PostgreSQL rows on a stack with PostgreSQL:
//! `pg-update` against `lua` on one hot SKU, with the CPU per answer of
//! the store that decided each sale, `pg-update` spread over 64 SKUs, and
//! the hot SKU with the server's `synchronous_commit` off beside on, and
//! `pg-batch` beside `pg-update` with each statement's time per sale.
//! Then, on the same stack, `bench --crowd`: each variant asked for at a
//! small and a larger crowd, with each store's CPU per answer.
//! The figures depend on the machine: the test checks that each was
//! measured and that the books hold every sale, never how fast.

use std::time::Duration;

use crate::bench::bench;
use crate::helpers::Stack;

#[tokio::test]
async fn the_pg_rows_measure_the_database_beside_redis() {
    if !stocklock::up::postgres::installed() {
        crate::helpers::missing_tool("PostgreSQL is not installed (scripts/deps.sh postgresql)");
        return;
    }
    let stack = Stack::start_with(2, None, crate::helpers::LOCK_STORES).await;
    let postgres = stack.postgres.as_ref().unwrap().url.clone();
    let (table, report) = bench(
        &stack,
        &[
            "--rows",
            "pg-update-vs-lua,pg-update-many-skus,pg-update-sync-off-vs-on,pg-batch-vs-update",
            "--runs",
            "2",
            "--duration",
            "500ms",
            "--concurrency",
            "16",
            "--postgres-url",
            &postgres,
        ],
        Duration::from_secs(180),
    )
    .await;
    let rows = report["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["row"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "pg-update-vs-lua",
            "pg-update-many-skus",
            "pg-update-sync-off-vs-on",
            "pg-batch-vs-update"
        ]
    );
    for row in rows {
        let runs = row["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "{row}");
        assert!(
            runs.iter()
                .flat_map(|r| r.as_array().unwrap())
                .all(|v| v.as_f64().unwrap() > 0.0),
            "{row}"
        );
        let name = row["row"].as_str().unwrap();
        assert!(
            table.lines().any(|l| l.starts_with(name)),
            "no {name} line: {table}"
        );
    }
    // The many-SKU row's second side is the first row's first: the same runs.
    let [hot, many] = [&rows[0], &rows[1]].map(|r| r["runs"].as_array().unwrap().clone());
    for (h, m) in hot.iter().zip(&many) {
        assert_eq!(h[0], m[1], "{h} {m}");
    }
    let figures = &report["postgres"];
    for (field, runs) in [
        ("postgres_usec_per_answer", "postgres_usec_runs"),
        ("redis_usec_per_answer", "redis_usec_runs"),
    ] {
        assert!(figures[field].as_f64().unwrap() > 0.0, "{field}: {figures}");
        assert_eq!(figures[runs].as_array().unwrap().len(), 2, "{figures}");
    }
    assert!(
        figures["postgres_usec_per_answer_many_skus"]
            .as_f64()
            .unwrap()
            > 0.0,
        "{figures}"
    );
    let note = rows[0]["note"].as_str().unwrap();
    assert!(
        note.contains("CPU per answer: PostgreSQL") && note.contains("6 000"),
        "{note}"
    );
    // synchronous_commit off beside on, each side's CPU said, and the
    // server's setting put back as up set it.
    let note = rows[2]["note"].as_str().unwrap();
    assert!(note.contains("us off") && note.contains("us on"), "{note}");
    let db = stocklock::orders::connect(&postgres).await.unwrap();
    let now: String = db
        .query_one("SHOW synchronous_commit", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(now, "on");
    // pg-batch beside pg-update: each side's CPU, its goals, and the
    // statements' time per sale read from pg_stat_statements (the batch's
    // transaction ends in its write of the sales from arrays).
    let note = rows[3]["note"].as_str().unwrap();
    assert!(
        note.contains("us (pg-batch)")
            && note.contains("us (pg-update)")
            && note.contains("goal <= 60"),
        "{note}"
    );
    assert!(
        note.contains("pg_stat_statements") && note.contains("us x"),
        "{note}"
    );
    assert_eq!(rows[3]["goal"], 5.0, "{}", rows[3]);
    for sku in ["bench-pg-batch", "bench-pg-batch-update"] {
        let state = stack.client.state(sku).await.unwrap();
        assert!(state.sold > 0, "{state:?}");
        assert_eq!((state.oversold, state.duplicates), (0, 0), "{state:?}");
    }
    // Every pg-update answer of the hot SKU was a sale the database's books
    // hold (the bench fails on any answer but 200).
    let state = stack.client.state("bench-pg-update").await.unwrap();
    assert!(state.sold > 0, "{state:?}");
    assert_eq!((state.oversold, state.duplicates), (0, 0), "{state:?}");
    crowd(&stack, &postgres).await;
    stack.stop().await;
}

/// `bench --crowd` on `stack`: every variant asked for, at 4 and at 40
/// buyers, each store's CPU per answer where it decides the sales, the
/// goals judged from the rows.
async fn crowd(stack: &Stack, postgres: &str) {
    let variants = "lua,lua-batch,etcd,zookeeper,pg-for-update,pg-advisory,pg-batch";
    let etcd = stack.etcd_members[0].url.clone();
    let zookeeper = stack.zookeeper[0].url.clone();
    let (table, report) = bench(
        stack,
        &[
            "--crowd",
            "--crowds",
            "4,40",
            "--crowd-variants",
            variants,
            "--runs",
            "1",
            "--duration",
            "400ms",
            "--postgres-url",
            postgres,
            "--etcd-endpoints",
            &etcd,
            "--zookeeper",
            &zookeeper,
        ],
        Duration::from_secs(180),
    )
    .await;
    assert!(
        table.contains("crowds of 4 and 40 buyers") && !table.contains("concurrency"),
        "{table}"
    );
    let crowd = &report["crowd"];
    assert_eq!(crowd["crowds"], serde_json::json!([4, 40]), "{crowd}");
    assert_eq!(
        report["rows"].as_array().unwrap().len(),
        0,
        "--crowd plays no row"
    );
    let rows = crowd["rows"].as_array().unwrap();
    let mut seen = Vec::new();
    for row in rows {
        let (v, buyers) = (
            row["variant"].as_str().unwrap(),
            row["buyers"].as_u64().unwrap(),
        );
        seen.push(format!("{v}@{buyers}"));
        let (sales, attempts) = (
            row["sales_per_s"].as_f64().unwrap(),
            row["attempts_per_s"].as_f64().unwrap(),
        );
        assert!(sales > 0.0 && attempts >= sales, "{row}");
        let nothing = row["changed_nothing"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&nothing), "{row}");
        assert!(
            (1.0 - nothing - sales / attempts).abs() < 0.05,
            "the shares add up: {row}"
        );
        assert!(
            row["p50_ms"].as_f64().unwrap() <= row["p99_ms"].as_f64().unwrap(),
            "{row}"
        );
        assert_eq!(row["oversold"], 0, "{row}");
        // The store that decides the variant's sales spent CPU on them.
        let store = match v {
            "etcd" => "etcd",
            "zookeeper" => "zookeeper",
            _ if v.starts_with("pg-") => "postgresql",
            _ => "redis",
        };
        let usec = row["usec_per_answer"][store].as_f64().unwrap_or(0.0);
        assert!(usec > 0.0, "{v} at {buyers}: no {store} CPU: {row}");
        assert!(
            table.lines().any(|l| l.starts_with(v)),
            "no {v} line: {table}"
        );
    }
    let expected: Vec<String> = variants
        .split(',')
        .flat_map(|v| [format!("{v}@4"), format!("{v}@40")])
        .collect();
    assert_eq!(seen, expected);
    // The goals, judged from the rows themselves.
    let sales = |v: &str, buyers: u64| {
        rows.iter()
            .find(|r| r["variant"] == v && r["buyers"] == buyers)
            .unwrap()["sales_per_s"]
            .as_f64()
            .unwrap()
    };
    let goals = crowd["goals"].as_array().unwrap();
    assert_eq!(goals.len(), 4, "{goals:?}");
    for (goal, v) in goals
        .iter()
        .zip(["pg-batch", "pg-advisory", "pg-for-update"])
    {
        let ratio = sales(v, 40) / sales(v, 4);
        assert!(
            (goal["ratio"].as_f64().unwrap() - ratio).abs() < 1e-6,
            "{goal}"
        );
        assert_eq!(goal["met"], ratio >= 0.5, "{goal}");
    }
    let ratio = sales("lua-batch", 40) / sales("lua", 40);
    assert!(
        (goals[3]["ratio"].as_f64().unwrap() - ratio).abs() < 1e-6,
        "{}",
        goals[3]
    );
    assert!(
        table.contains("goal: lua-batch against lua at 40 buyers"),
        "{table}"
    );
}
