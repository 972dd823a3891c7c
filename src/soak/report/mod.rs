//! The soak's figures: its live status (for the dashboard), the recovery
//! times, the unknowns, the order books and Redis at the end (`at_end.rs`),
//! and the report printed (`print.rs`).

mod at_end;
mod print;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;

use redis::AsyncCommands;

use super::buyers::Shared;
use super::nemesis::Nemesis;
use crate::client::StackClient;
use crate::store::Store;
use crate::variants::Variant;
use crate::wire::{Recovery, SOAK_STATUS_KEY, SoakFault, SoakStatus, SoakViolation};

pub(super) use self::at_end::{BOOK_KEYS, KEYS_PER_SKU, STACK_KEYS, redis_at_end, redis_wrong};
pub(super) use self::print::print;

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
