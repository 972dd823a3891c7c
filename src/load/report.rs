//! What `stocklock load` prints: the comparison table of the runs, and the
//! one line of a `--path` baseline.

use super::engine::Tally;
use crate::wire::RunReport;

/// The comparison table, one row per variant.
pub fn print_table(reports: &[RunReport]) {
    println!(
        "{:<14} {:>8} {:>6} {:>8} {:>6} {:>7} {:>6} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8} {:>5}  {:<16} {:<14} verdict",
        "variant",
        "requests",
        "sold",
        "sold_out",
        "busy",
        "unknown",
        "errors",
        "req/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "remaining",
        "oversold",
        "dups",
        "per instance",
        "expected"
    );
    for r in reports {
        let share: Vec<String> = r
            .per_instance
            .iter()
            .map(|(name, n)| format!("{name}:{n}"))
            .collect();
        println!(
            "{:<14} {:>8} {:>6} {:>8} {:>6} {:>7} {:>6} {:>9.0} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>9} {:>8} {:>5}  {:<16} {:<14} {}",
            r.variant,
            r.requests,
            r.sold,
            r.sold_out,
            r.busy,
            r.unknown,
            r.errors.total(),
            r.rps,
            r.latency_ms.p50,
            r.latency_ms.p90,
            r.latency_ms.p99,
            r.latency_ms.max,
            r.remaining,
            r.oversold,
            r.duplicates,
            share.join(" "),
            r.expected,
            r.verdict
        );
    }
    let errors: Vec<String> = reports
        .iter()
        .filter(|r| r.errors.total() > 0)
        .map(|r| {
            let e = r.errors;
            format!(
                "{}: connect {} timeout {} 5xx {} other {}",
                r.variant, e.connect, e.timeout, e.server, e.other
            )
        })
        .collect();
    if !errors.is_empty() {
        println!("errors by kind: {}", errors.join("; "));
    }
    for r in reports.iter().filter(|r| !r.per_sku.is_empty()) {
        let oversold: Vec<String> = r
            .per_sku
            .iter()
            .filter(|s| s.oversold > 0 || s.duplicates > 0)
            .map(|s| format!("{} +{}", s.sku, s.oversold.max(s.duplicates)))
            .collect();
        let worst = r.per_sku.iter().map(|s| s.oversold).max().unwrap_or(0);
        println!(
            "{}: {} SKUs, oversold in {} of them (worst {worst}){}{}",
            r.variant,
            r.per_sku.len(),
            oversold.len(),
            if oversold.is_empty() { "" } else { ": " },
            oversold.join(", ")
        );
    }
}

/// The one line of a `--path` baseline: throughput, latency, statuses.
pub fn print_path_line(path: &str, tally: &Tally) {
    let e = tally.errors;
    println!(
        "GET {path}: {} requests in {:.2} s, {:.0} req/s | p50 {:.2} ms p90 {:.2} ms p99 {:.2} ms max {:.2} ms | \
         200 {} 409 {} 429 {} other 2xx {} | errors: connect {} timeout {} 5xx {} other {}",
        tally.requests,
        tally.elapsed.as_secs_f64(),
        tally.rps(),
        tally.latency_ms(0.5),
        tally.latency_ms(0.9),
        tally.latency_ms(0.99),
        tally.max_latency_ms(),
        tally.sold,
        tally.sold_out,
        tally.busy,
        tally.ok_other,
        e.connect,
        e.timeout,
        e.server,
        e.other
    );
}
