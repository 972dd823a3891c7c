//! A SKU's state as the ledger reads it: one script per SKU (or per
//! bucket, summed), beside Redis's memory.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use redis::Script;
use redis::aio::ConnectionLike;

use crate::knobs::MAX_BUCKETS;
use crate::store::{Keys, StoreError};
use crate::wire::{LockState, StateSnapshot};

static STATE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/state.lua")));

/// (stock, initial, sold, duplicates, busy, lost_locks, renewals,
/// fenced_rejections, replays, buckets, unknown, returned), pttl, type of
/// the lock, holder, served, (mark_refusals, post_sale_failures).
type RawState = (
    (i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64),
    i64,
    String,
    Option<String>,
    Vec<String>,
    (Option<i64>, Option<i64>),
);

/// Redis's memory in use and its limit (`INFO memory`); `None` when Redis
/// does not say (a cluster answers per node), which a state shows as absent.
pub async fn redis_memory<C: ConnectionLike>(conn: &mut C) -> Option<crate::wire::RedisMemory> {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(conn)
        .await
        .ok()?;
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|value| value.trim().parse().ok())
    };
    Some(crate::wire::RedisMemory {
        used_bytes: field("used_memory")?,
        max_bytes: field("maxmemory")?,
    })
}

/// A snapshot of a SKU: one script; for a SKU split into buckets, the sum
/// of its buckets (each read by one script: consistent per bucket, not
/// across them).
pub async fn snapshot<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    sku: &str,
) -> Result<StateSnapshot, StoreError> {
    let mut total = snapshot_one(conn, keys, sku).await?;
    for b in 0..total.buckets {
        total.absorb(&snapshot_one(conn, &keys.bucket(b), sku).await?);
    }
    // One SKU: its oversell is derived from the sums, not summed.
    total.oversold =
        crate::wire::oversold(total.sold, total.returned, total.initial, total.remaining);
    Ok(total)
}

async fn snapshot_one<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    sku: &str,
) -> Result<StateSnapshot, StoreError> {
    let (
        (
            remaining,
            initial,
            sold,
            duplicates,
            busy,
            lost_locks,
            renewals,
            fenced_rejections,
            replays,
            buckets,
            unknown,
            returned,
        ),
        pttl,
        kind,
        holder,
        served,
        (mark_refusals, post_sale_failures),
    ): RawState = STATE
        .key(&keys.stock)
        .key(&keys.ledger)
        .key(&keys.units)
        .key(&keys.served)
        .key(&keys.lock)
        .invoke_async(conn)
        .await?;
    let per_instance: BTreeMap<String, i64> = served
        .chunks_exact(2)
        .map(|pair| (pair[0].clone(), pair[1].parse().unwrap_or(0)))
        .collect();
    let held = kind != "none";
    Ok(StateSnapshot {
        sku: sku.to_owned(),
        initial,
        remaining,
        sold,
        oversold: crate::wire::oversold(sold, returned, initial, remaining),
        returned,
        duplicates,
        busy,
        lost_locks,
        fenced_rejections,
        replays,
        renewals,
        unknown,
        buckets: u32::try_from(buckets).unwrap_or(0).min(MAX_BUCKETS),
        mark_refusals: mark_refusals.unwrap_or(0),
        post_sale_failures: post_sale_failures.unwrap_or(0),
        per_instance,
        lock: LockState {
            held,
            holder: if held { holder } else { None },
            ttl_ms: (held && pttl >= 0).then_some(pttl),
            no_ttl: held && pttl == -1,
        },
    })
}
