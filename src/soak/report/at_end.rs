//! Redis at the end of a soak: its memory, its keys and the locks left,
//! against what the SKUs still need.

use crate::store::Store;
use crate::wire::RedisAtEnd;

/// The most memory Redis may use at the end.
pub(in crate::soak) const MEMORY_LIMIT: u64 = 256 * 1024 * 1024;
/// Keys one SKU may need (its ledger, stock, units, ids, timeline, orders...),
/// and as many again for each of a sharded SKU's 8 buckets.
pub(in crate::soak) const KEYS_PER_SKU: u64 = 14 * 9;
/// Keys an order SKU's books keep once it matched: its stock, ledger,
/// units, stream, returns and epochs.
pub(in crate::soak) const BOOK_KEYS: u64 = 7;
/// Keys the stack keeps besides the soak's SKUs (its own SKUs, events,
/// marks, the status).
pub(in crate::soak) const STACK_KEYS: u64 = 400;

/// Redis once the faults stopped: its memory, its keys and the locks left.
pub(in crate::soak) async fn redis_at_end(
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
pub(in crate::soak) fn redis_wrong(end: &RedisAtEnd) -> Vec<String> {
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
