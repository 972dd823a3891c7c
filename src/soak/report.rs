//! The soak's figures: its live status (for the dashboard), the recovery
//! times, the unknowns, the order books and Redis at the end, and the
//! report printed.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;

use redis::AsyncCommands;

use super::buyers::Shared;
use super::nemesis::Nemesis;
use crate::client::StackClient;
use crate::store::Store;
use crate::variants::Variant;
use crate::wire::{
    Recovery, RedisAtEnd, SOAK_STATUS_KEY, SoakFault, SoakReport, SoakStatus, SoakViolation,
};

/// The most memory Redis may use at the end.
pub(super) const MEMORY_LIMIT: u64 = 256 * 1024 * 1024;
/// Keys one SKU may need (its ledger, stock, units, ids, timeline, orders...),
/// and as many again for each of a sharded SKU's 8 buckets.
pub(super) const KEYS_PER_SKU: u64 = 14 * 9;
/// Keys an order SKU's books keep once it matched: its stock, ledger,
/// units, stream, returns and epochs.
pub(super) const BOOK_KEYS: u64 = 7;
/// Keys the stack keeps besides the soak's SKUs (its own SKUs, events,
/// marks, the status).
pub(super) const STACK_KEYS: u64 = 400;

/// Writes the live status where the dashboard reads it.
pub(super) struct Status {
    store: Store,
    seed: u64,
    minutes: f64,
}

impl Status {
    pub(super) fn new(store: Store, seed: u64, minutes: f64) -> Self {
        Status {
            store,
            seed,
            minutes,
        }
    }

    pub(super) async fn write(
        &self,
        phase: &str,
        shared: &Shared,
        nemesis: &Nemesis,
        found: &[SoakViolation],
    ) {
        let faults = nemesis
            .log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut violations = BTreeMap::new();
        for v in found {
            *violations.entry(v.variant.clone()).or_insert(0) += 1;
        }
        let status = SoakStatus {
            seed: self.seed,
            minutes: self.minutes,
            elapsed_s: shared.started.elapsed().as_secs_f64(),
            phase: phase.to_owned(),
            requests: shared.requests.load(Ordering::Relaxed),
            sold: shared.sold.load(Ordering::Relaxed),
            unknowns: shared.unknowns.load(Ordering::Relaxed),
            unknowns_resolved: shared.unknowns_resolved.load(Ordering::Relaxed),
            faults: by_kind(&faults),
            violations,
            last_fault: faults
                .iter()
                .rfind(|f| f.error.is_empty())
                .map(|f| format!("{:.1} s {} {}", f.at_s, f.kind, f.target)),
            updated_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        };
        let Ok(json) = serde_json::to_string(&status) else {
            return;
        };
        // A running soak's status lives 30 s past its last write; the
        // result's an hour. Redis may be down or asleep right now (a
        // fault): the next tick writes again, the soak does not wait.
        let ttl = if phase == "done" { 3_600 } else { 30 };
        let write = async {
            if let Ok(mut conn) = self.store.conn().await {
                let _: Result<(), _> = conn.set_ex(SOAK_STATUS_KEY, json, ttl).await;
            }
        };
        let _ = tokio::time::timeout(std::time::Duration::from_millis(500), write).await;
    }
}

/// Faults that struck, by kind.
pub(super) fn by_kind(faults: &[SoakFault]) -> BTreeMap<String, u64> {
    let mut kinds = BTreeMap::new();
    for fault in faults.iter().filter(|f| f.error.is_empty()) {
        *kinds.entry(fault.kind.clone()).or_insert(0) += 1;
    }
    kinds
}

/// Per fault kind: for each fault that healed before `quiet_ms` and each
/// variant, how long after the healing the variant's next sale came
/// (`sales`: each variant's sale times).
pub(super) fn recovery(
    sales: &mut BTreeMap<Variant, Vec<u64>>,
    faults: &[SoakFault],
    quiet_ms: u64,
) -> Vec<Recovery> {
    for times in sales.values_mut() {
        times.sort_unstable();
    }
    let mut waits: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for fault in faults.iter().filter(|f| f.error.is_empty()) {
        let healed = (fault.healed_s * 1e3) as u64;
        if healed > quiet_ms {
            continue;
        }
        for times in sales.values() {
            let next = times.partition_point(|&t| t < healed);
            if let Some(&t) = times.get(next) {
                waits
                    .entry(fault.kind.clone())
                    .or_default()
                    .push(t - healed);
            }
        }
    }
    waits
        .into_iter()
        .map(|(kind, mut ms)| {
            ms.sort_unstable();
            let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
            Recovery {
                kind,
                count: ms.len() as u64,
                p50_ms: at(0.5),
                p99_ms: at(0.99),
                max_ms: ms[ms.len() - 1],
            }
        })
        .collect()
}

/// Redis once the faults stopped: its memory, its keys and the locks left.
pub(super) async fn redis_at_end(
    store: &Store,
    keys_allowed: u64,
    deadlocked: &[String],
) -> RedisAtEnd {
    let mut end = RedisAtEnd {
        keys_allowed,
        ..Default::default()
    };
    let Ok(mut conn) = store.conn().await else {
        return end;
    };
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut conn)
        .await
        .unwrap_or_default();
    end.used_memory_bytes = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    end.keys = redis::cmd("DBSIZE")
        .query_async(&mut conn)
        .await
        .unwrap_or(0);
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = match redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await
        {
            Ok(page) => page,
            Err(_) => break,
        };
        for key in &keys {
            let kind = key.split([':', '{']).next().unwrap_or_default();
            let soak = key.contains("{soak");
            let kind = format!("{kind}{}", if soak { " (soak)" } else { "" });
            *end.kinds.entry(kind).or_insert(0) += 1;
        }
        end.locks_left += keys
            .iter()
            .filter(|k| k.starts_with("lock:{soak"))
            .filter(|k| !deadlocked.iter().any(|sku| k.contains(&format!("{{{sku}"))))
            .count() as u64;
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    end
}

/// What is wrong with Redis at the end, if anything.
pub(super) fn redis_wrong(end: &RedisAtEnd) -> Vec<String> {
    let mut wrong = Vec::new();
    if end.used_memory_bytes > MEMORY_LIMIT {
        wrong.push(format!(
            "Redis uses {} MB at the end (limit 256)",
            end.used_memory_bytes >> 20
        ));
    }
    if end.keys > end.keys_allowed {
        wrong.push(format!(
            "Redis holds {} keys at the end; the SKUs need at most {}",
            end.keys, end.keys_allowed
        ));
    }
    if end.locks_left > 0 {
        wrong.push(format!(
            "{} locks were left held once the faults stopped (no claimed deadlock)",
            end.locks_left
        ));
    }
    wrong
}

/// Draws each violation's SKU timeline beside the JSON report.
pub(super) async fn draw_timelines(
    client: &StackClient,
    violations: &mut [SoakViolation],
    json: &Path,
) {
    let dir = json.parent().unwrap_or(Path::new("."));
    for v in violations.iter_mut().filter(|v| !v.sku.is_empty()) {
        if let Ok(page) = client.timeline_export(&v.sku).await {
            let file = dir.join(format!("soak-{}.html", v.sku));
            if std::fs::write(&file, page).is_ok() {
                v.timeline = Some(file.display().to_string());
            }
        }
    }
}

/// The report on the terminal.
pub(super) fn print(r: &SoakReport) {
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
        super::faults::GRACE_S
    );
    if let Some(file) = &r.history_file {
        println!("  every round's history: {file} (stocklock history check {file})");
    }
}
