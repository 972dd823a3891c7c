//! `stocklock compare`, as a user runs it: article 000's lock-store table
//! measured on a stack of its own (the failover column is the lab's
//! `failover` cell, proved in `lab.rs`; skipped here).

use std::time::Duration;

use serde_json::Value;

#[tokio::test]
async fn compare_measures_every_store_side_by_side() {
    let _turn = crate::helpers::stack_turn().await;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("compare.json");
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
        .args(["compare", "--runs", "1", "--duration", "400ms", "-c", "8"])
        .args(["--no-failover", "--json", json.to_str().unwrap()])
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(240), run)
        .await
        .expect("compare took too long")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success());

    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = report["rows"].as_array().unwrap();
    let stores: Vec<&str> = rows.iter().map(|r| r["store"].as_str().unwrap()).collect();
    // With a replica (redis-sentinel is installed where the tests run), the
    // Redis lock is measured again, each lock WAITed for by the replica;
    // with PostgreSQL, its advisory lock (pg-advisory) too.
    assert_eq!(
        stores,
        [
            "redis",
            "redis+wait",
            "redlock",
            "etcd",
            "zookeeper",
            "postgres"
        ]
    );
    assert_eq!(rows[5]["variant"], "pg-advisory");
    for row in rows {
        let store = &row["store"];
        // Every store locked and sold something, and none oversold.
        assert!(
            row["pairs_per_s_median"].as_f64().unwrap() > 0.0,
            "{store}: {row}"
        );
        assert!(
            row["sales_per_s_median"].as_f64().unwrap() > 0.0,
            "{store}: {row}"
        );
        assert_eq!(row["oversold"], 0, "{store}: {row}");
        let (p50, p99) = (
            row["p50_ms"].as_f64().unwrap(),
            row["p99_ms"].as_f64().unwrap(),
        );
        assert!(p50 > 0.0 && p50 <= p99, "{store}: {row}");
        assert!(row["failover"].is_null(), "--no-failover ran no failover");
    }
    // The article's table, the measured one, and a verdict on performance
    // read from the same figures.
    assert!(stdout.contains("article 000 says:"), "{stdout}");
    assert!(stdout.contains("measured here:"), "{stdout}");
    let performance = stdout
        .lines()
        .find(|l| l.starts_with("performance, "))
        .expect("a performance verdict");
    let redis = rows[0]["pairs_per_s_median"].as_f64().unwrap();
    let slower = rows[3..5]
        .iter()
        .all(|r| r["pairs_per_s_median"].as_f64().unwrap() <= redis);
    let verdict = if slower { "confirmed" } else { "refuted" };
    assert!(performance.contains(verdict), "{performance}");
    // WAIT's cost, read from the same figures.
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("WAIT 1 after each lock")),
        "{stdout}"
    );
    let postgres = stdout
        .lines()
        .find(|l| l.starts_with("PostgreSQL's advisory lock"))
        .expect("a line on PostgreSQL's advisory lock");
    let pairs = rows[5]["pairs_per_s_median"].as_f64().unwrap();
    assert!(
        postgres.contains(&format!("{pairs:.0} pairs/s")),
        "{postgres}"
    );
    assert!(report["date"].as_str().unwrap().ends_with("UTC"));
}

/// A window shorter than one pair still counts the pair, from when it
/// began: a store slow to answer (PostgreSQL on a loaded machine took more
/// than compare's 400 ms to connect) measures slow, never 0 pairs a second.
#[tokio::test]
async fn a_pair_longer_than_the_window_is_counted_not_lost() {
    let redis = crate::helpers::redis().await;
    let stores = stocklock::compare::Stores {
        redis_url: redis.url(),
        ..Default::default()
    };
    let rate = stocklock::compare::pairs_per_second(
        stocklock::compare::PairStore::Redis,
        &stores,
        Duration::ZERO,
    )
    .await
    .unwrap()
    .expect("the stack has a Redis");
    assert!(rate > 0.0, "{rate} pairs a second");
}
