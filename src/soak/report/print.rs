//! The soak's report on the terminal, the history checker's verdicts
//! beside the judge's.

use crate::wire::SoakReport;

/// The report on the terminal.
pub(in crate::soak) fn print(r: &SoakReport) {
    let struck: u64 = r.faults_by_kind.values().sum();
    println!(
        "\nsoak seed {}: {:.1} min of faults, {:.0} s in all; {} requests, {} sold; {} faults struck ({} refused)",
        r.seed,
        r.minutes,
        r.elapsed_s,
        r.requests,
        r.sold,
        struck,
        r.faults.len() as u64 - struck
    );
    println!("\nfaults by kind:");
    for (kind, n) in &r.faults_by_kind {
        println!("  {kind:<26} {n:>4}");
    }
    println!(
        "\n{:<16} {:>6} {:>8} {:>6} {:>10} {:>9} {:>10}",
        "variant", "rounds", "requests", "sold", "oversold*", "deadlock*", "violations"
    );
    for v in &r.variants {
        println!(
            "{:<16} {:>6} {:>8} {:>6} {:>10} {:>9} {:>10}",
            v.variant,
            v.rounds,
            v.requests,
            v.sold,
            v.oversold_allowed,
            v.deadlocks_allowed,
            v.violations
        );
    }
    println!("  * counted where the faults that struck the round claim it (not a violation)");
    print_history(r);
    let u = &r.unknowns;
    println!(
        "\nunknowns: {} (settled by a retry with the same id: {} sold, {} not sold; {} unresolved)",
        u.total, u.sold, u.not_sold, u.unresolved
    );
    println!("\nrecovery after each kind of fault (next sale of each variant):");
    for rec in &r.recovery {
        println!(
            "  {:<26} p50 {:>6} ms  p99 {:>6} ms  max {:>6} ms  ({} measured)",
            rec.kind, rec.p50_ms, rec.p99_ms, rec.max_ms, rec.count
        );
    }
    println!(
        "\norders: {} of {} order SKUs match their ledger",
        r.orders_matched,
        r.orders_matched + r.orders.len() as u64
    );
    for o in &r.orders {
        let judged = if o.allowed { "claimed" } else { "VIOLATION" };
        println!("  {} {}: {} ({judged})", o.variant, o.sku, o.verdict);
    }
    println!(
        "\nredis at the end: {:.1} MB, {} keys (at most {}), {} locks left",
        r.redis.used_memory_bytes as f64 / 1048576.0,
        r.redis.keys,
        r.redis.keys_allowed,
        r.redis.locks_left
    );
    let kinds: Vec<String> = r
        .redis
        .kinds
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    println!("  keys by kind: {}", kinds.join(", "));
    if r.violations.is_empty() {
        println!("\n0 violations of a claim.");
        return;
    }
    println!("\n{} VIOLATIONS:", r.violations.len());
    for v in &r.violations {
        println!(
            "\n- {} {}: {} ({:.1}-{:.1} s)",
            v.variant, v.sku, v.what, v.from_s, v.to_s
        );
        if let Some(h) = &v.history_check {
            println!(
                "    history checker: {} ({} ops, {} ms){}",
                h.verdict,
                h.ops,
                h.elapsed_ms,
                if h.why.is_empty() {
                    String::new()
                } else {
                    format!(": {}", h.why)
                }
            );
        }
        if v.faults.is_empty() {
            println!("    no fault struck any part of the stack in or around its window");
        }
        for f in &v.faults {
            println!("    fault {f}");
        }
        for line in v.history.iter().rev().take(12).rev() {
            println!("    {line}");
        }
        if let Some(t) = &v.timeline {
            println!("    timeline: {t}");
        }
        if !v.recorded.is_empty() {
            let where_ = r
                .history_file
                .as_deref()
                .unwrap_or("the JSON report's `recorded`");
            println!(
                "    its recorded history: {} lines, in {where_}",
                v.recorded.len()
            );
        }
        println!("    again: {}", v.rerun);
    }
}

/// The history checker beside the soak's judge: each variant's rounds by
/// its verdict, and the time it took per round.
fn print_history(r: &SoakReport) {
    println!("\nthe history checker (what the buyers were told), rounds by verdict:");
    let (mut rounds, mut ms, mut max) = (0u64, 0u64, 0u64);
    for v in &r.variants {
        let verdicts: Vec<String> = v.history.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let judged: u64 = v.history.values().sum();
        rounds += judged;
        ms += v.history_ms;
        max = max.max(v.history_ms_max);
        println!(
            "  {:<16} {}  ({} ms in all, {} ms at most)",
            v.variant,
            verdicts.join(", "),
            v.history_ms,
            v.history_ms_max
        );
    }
    if rounds > 0 {
        println!(
            "  {rounds} rounds judged in {ms} ms: {:.2} ms a round on average, {max} ms at most",
            ms as f64 / rounds as f64
        );
    }
    println!(
        "  each round judged within {:.1} s of its end (the judges wait {:.0} s, and while a fault that struck it plays)",
        r.judged_late_s,
        crate::soak::faults::GRACE_S
    );
    if let Some(file) = &r.history_file {
        println!("  every round's history: {file} (stocklock history check {file})");
    }
}
