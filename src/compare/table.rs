//! The comparison as a table: article 000's cells beside the measured ones.

use super::{CompareReport, StoreRow};

/// What article 000's table says of each store: performance, consistency,
/// reentrancy, automatic renewal, what it suits. Redlock is not in the
/// article's table; its row says what the article says of it elsewhere.
fn article(store: &str) -> [&'static str; 5] {
    match store {
        "redis" => [
            "highest",
            "AP",
            "extra work",
            "Redisson",
            "high concurrency",
        ],
        "redis+wait" => [
            "(not in the table)",
            "AP (WAIT: not CP)",
            "extra work",
            "Redisson",
            "-",
        ],
        "redlock" => [
            "(not in the table)",
            "majority of N",
            "extra work",
            "extra work",
            "(a Redis that must not lose locks)",
        ],
        "etcd" => ["medium", "CP", "extra work", "none", "strong consistency"],
        "zookeeper" => ["medium", "CP", "native", "none", "strong consistency"],
        "postgres" => [
            "(not in the table)",
            "one server's",
            "-",
            "-",
            "(the stock's own database)",
        ],
        _ => ["?"; 5],
    }
}

/// What this project's lock on the store does for the same columns.
fn here(store: &str) -> [&'static str; 2] {
    match store {
        "redis" | "redis+wait" => ["yes (hash of owner → count)", "yes (watchdog, lease/3)"],
        "redlock" => ["no", "yes (watchdog on every node)"],
        "etcd" => ["no (etcd's Mutex is not)", "yes (lease keep-alive, TTL/3)"],
        "zookeeper" => ["no (Curator's is, per JVM thread)", "yes (session pings)"],
        "postgres" => [
            "yes (a session's requests stack)",
            "none needed (no lease: held until commit or the session ends)",
        ],
        _ => ["?"; 2],
    }
}

fn figure(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.0}"))
}

fn ms(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"))
}

/// Prints the header, the article's table, the measured one and a verdict
/// line per article cell that a figure confirms or refutes.
pub(super) fn print(report: &CompareReport) {
    println!(
        "stocklock compare: {}, {} cores ({}), load average {:.2} at start; {} runs of {:.1} s each, medians; {} clients on one SKU",
        report.date,
        report.machine.cores,
        report.machine.cpu,
        report.machine.load_average_at_start,
        report.runs,
        report.duration_ms as f64 / 1000.0,
        report.concurrency
    );
    println!();
    println!("article 000 says:");
    println!(
        "{:<10} {:<20} {:<18} {:<11} {:<10} suits",
        "store", "performance", "consistency", "reentrant", "renewal"
    );
    for row in &report.rows {
        let [performance, consistency, reentrant, renewal, suits] = article(row.store);
        println!(
            "{:<10} {performance:<20} {consistency:<18} {reentrant:<11} {renewal:<10} {suits}",
            row.store
        );
    }
    println!();
    println!("measured here:");
    println!(
        "{:<10} {:<11} {:>12} {:>12} {:>8} {:>8} {:>9}  {:<12} {:<34} renewal",
        "store",
        "variant",
        "pairs/s",
        "sales/s",
        "p50 ms",
        "p99 ms",
        "oversold",
        "failover",
        "reentrant"
    );
    for row in &report.rows {
        let [reentrant, renewal] = here(row.store);
        println!(
            "{:<10} {:<11} {:>12} {:>12} {:>8} {:>8} {:>9}  {:<12} {reentrant:<34} {renewal}",
            row.store,
            row.variant,
            figure(row.pairs_per_s_median),
            figure(row.sales_per_s_median),
            ms(row.p50_ms),
            ms(row.p99_ms),
            row.oversold,
            row.failover.as_deref().unwrap_or("-"),
        );
    }
    println!();
    for line in verdicts(&report.rows) {
        println!("{line}");
    }
}

/// The article's cells, each confirmed or refuted by a measured figure.
pub(super) fn verdicts(rows: &[StoreRow]) -> Vec<String> {
    let find = |store: &str| rows.iter().find(|r| r.store == store);
    let mut lines = Vec::new();
    let pairs = |store: &str| find(store).and_then(|r| r.pairs_per_s_median);
    if let (Some(redis), Some(etcd), Some(zk)) = (pairs("redis"), pairs("etcd"), pairs("zookeeper"))
    {
        let fastest = redis >= etcd && redis >= zk;
        lines.push(format!(
            "performance, \"Redis highest, ZooKeeper and etcd medium\": {} — uncontended pairs/s: redis {redis:.0}, zookeeper {zk:.0} ({:.1}x slower), etcd {etcd:.0} ({:.1}x slower)",
            if fastest { "confirmed" } else { "refuted" },
            redis / zk.max(f64::MIN_POSITIVE),
            redis / etcd.max(f64::MIN_POSITIVE),
        ));
    }
    let failover = |store: &str| find(store).and_then(|r| r.failover.clone());
    if let (Some(redis), Some(etcd), Some(zk)) =
        (failover("redis"), failover("etcd"), failover("zookeeper"))
    {
        let confirmed = redis == "oversells" && etcd == "safe" && zk == "safe";
        lines.push(format!(
            "consistency, \"Redis AP, ZooKeeper and etcd CP\": {} — failover: redis (token lock, master killed before the lock reached its replica) {redis}; etcd (leader killed under the holder) {etcd}; zookeeper (the leader of three servers killed under the holder) {zk}",
            if confirmed { "confirmed" } else { "refuted" },
        ));
    }
    let sales = |store: &str| find(store).and_then(|r| r.sales_per_s_median);
    let p50 = |store: &str| find(store).and_then(|r| r.p50_ms);
    if let (Some(plain), Some(waited), Some(p50_plain), Some(p50_waited)) = (
        sales("redis"),
        sales("redis+wait"),
        p50("redis"),
        p50("redis+wait"),
    ) {
        lines.push(format!(
            "WAIT 1 after each lock (replicas=1): {:.0} sales/s instead of {plain:.0} ({:.0} %), p50 {p50_waited:.1} ms instead of {p50_plain:.1}; in a failover after WAIT saw the lock on the replica: {} (WAIT covers the lock, not the write the failover rolls back); an acknowledged write is not a consensus: Redis stays AP",
            waited,
            100.0 * waited / plain.max(f64::MIN_POSITIVE),
            failover("redis+wait").unwrap_or_else(|| "-".to_owned()),
        ));
    }
    if let (Some(pg), Some(redis)) = (pairs("postgres"), pairs("redis")) {
        lines.push(format!(
            "PostgreSQL's advisory lock (not in the article's table; pg-advisory): {pg:.0} pairs/s, {:.1}x slower than redis uncontended; {} sales/s through pg-advisory; one server, so no failover verdict: the lock lives and dies with the database the stock is in, and its transaction's commit releases it with the write",
            redis / pg.max(f64::MIN_POSITIVE),
            sales("postgres").map_or_else(|| "-".to_owned(), |s| format!("{s:.0}")),
        ));
    }
    lines.push(
        "reentrant, \"ZooKeeper native, Redis and etcd extra work\": the recipe itself is not reentrant on any store; Curator counts holds per JVM thread and Redisson in a Redis hash (this project's watchdog lock does the same)".to_owned(),
    );
    lines.push(
        "renewal, \"Redisson only\": refuted as a property of the store — an etcd lease is renewed by keep-alives and a ZooKeeper session by pings, both while the process lives, as Redisson's watchdog renews a Redis lease".to_owned(),
    );
    lines
}
