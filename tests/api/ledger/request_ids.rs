//! A flood of distinct request ids (the abuse test): what Redis
//! keeps for them is bounded per SKU, a sold-out answer's record is brief,
//! the id over the cap is answered 429 `request_ids_full`, and the ledger
//! stays exact.

use super::*;
use stocklock::chaos::Chaos;
use stocklock::store::Store;

use crate::helpers::{self, InProcess, in_process_config};

const CAP: u64 = 1_000;
const IDS: usize = 20_000;

/// `n` requests to `/deductStock/{variant}?sku={sku}`, each with its own
/// new id, from eight buyers at once; how many of each status came back.
async fn flood(instance: &InProcess, variant: &str, sku: &str, n: usize) -> BTreeMap<u16, usize> {
    let buyers: Vec<_> = (0..8)
        .map(|buyer| {
            let (instance, variant, sku) = (instance.clone(), variant.to_owned(), sku.to_owned());
            tokio::spawn(async move {
                let mut statuses = BTreeMap::new();
                for i in (buyer..n).step_by(8) {
                    let uri = format!("/deductStock/{variant}?sku={sku}&request_id={sku}-{i}");
                    let (status, body) = instance.get(&uri).await;
                    if status == 429 {
                        assert_eq!(body["reason"], "request_ids_full", "{body}");
                    }
                    *statuses.entry(status.as_u16()).or_insert(0) += 1;
                }
                statuses
            })
        })
        .collect();
    let mut statuses = BTreeMap::new();
    for buyer in buyers {
        for (status, n) in buyer.await.unwrap() {
            *statuses.entry(status).or_insert(0) += n;
        }
    }
    statuses
}

/// Redis's memory in use and its key count.
async fn footprint(conn: &mut redis::aio::MultiplexedConnection) -> (i64, i64) {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(conn)
        .await
        .unwrap();
    let used = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    let keys: i64 = redis::cmd("DBSIZE").query_async(conn).await.unwrap();
    (used, keys)
}

async fn ids_remembered(conn: &mut redis::aio::MultiplexedConnection, sku: &str) -> u64 {
    redis::cmd("ZCARD")
        .arg(format!("request_times:{{{sku}}}"))
        .query_async(conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn distinct_request_ids_cost_redis_a_bounded_memory_and_the_ledger_stays_exact() {
    /// ~250 bytes an id: the cap's worth, with room for the allocator.
    const MAX_GROWTH: i64 = 1 << 20;
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let config = stocklock::http::InstanceConfig {
        request_ids_per_sku: CAP,
        // Every request reaches Redis: the marks would hide the flood.
        sold_out_mark_ttl: Duration::ZERO,
        ..in_process_config("t")
    };
    let wakeups = stocklock::lock::Wakeups::new();
    let instance = InProcess::with(&store, wakeups, config);
    let mut conn = helpers::redis_conn(&redis.url()).await;
    instance.reset("gone", 0, 0).await;
    instance.reset("stocked", 5_000, 0).await;
    instance.reset("none", 5_000, 0).await;

    // Sold out: every answer is sold out, and only the cap's worth is kept.
    let before = footprint(&mut conn).await;
    let started = Instant::now();
    let statuses = flood(&instance, "lua", "gone", IDS).await;
    let after = footprint(&mut conn).await;
    eprintln!(
        "{IDS} sold-out ids in {:?}: memory {} -> {} bytes, keys {} -> {}",
        started.elapsed(),
        before.0,
        after.0,
        before.1,
        after.1
    );
    assert_eq!(statuses, BTreeMap::from([(409, IDS)]));
    assert!(ids_remembered(&mut conn, "gone").await <= CAP);
    assert!(after.0 - before.0 < MAX_GROWTH, "{before:?} -> {after:?}");
    // The SKU's request ids, their times, and its answers per instance.
    assert!(after.1 <= before.1 + 3, "{before:?} -> {after:?}");
    let state = instance.state("gone").await;
    assert_eq!((state.sold, state.oversold), (0, 0), "{state:?}");

    // Stocked: the cap's worth sells, the id over the cap is refused, 429.
    let before = footprint(&mut conn).await;
    let statuses = flood(&instance, "lua", "stocked", IDS).await;
    let after = footprint(&mut conn).await;
    eprintln!(
        "{IDS} ids on a stocked SKU: memory {} -> {} bytes, keys {} -> {}",
        before.0, after.0, before.1, after.1
    );
    let cap = CAP as usize;
    assert_eq!(statuses, BTreeMap::from([(200, cap), (429, IDS - cap)]));
    assert_eq!(ids_remembered(&mut conn, "stocked").await, CAP);
    assert!(after.0 - before.0 < MAX_GROWTH, "{before:?} -> {after:?}");
    let state = instance.state("stocked").await;
    assert_eq!(
        (
            state.sold,
            state.remaining,
            state.busy,
            state.oversold,
            state.duplicates
        ),
        (CAP as i64, 5_000 - CAP as i64, (IDS - cap) as i64, 0, 0),
        "{state:?}"
    );
    // An id already remembered is answered as ever: its sale, replayed.
    let (status, body) = instance
        .get("/deductStock/lua?sku=stocked&request_id=stocked-0")
        .await;
    assert_eq!(
        (status.as_u16(), &body["replayed"]),
        (200, &json!(true)),
        "{body}"
    );

    // A lock variant claims its ids first: the same cap.
    let statuses = flood(&instance, "none", "none", cap + 100).await;
    assert_eq!(statuses, BTreeMap::from([(200, cap), (429, 100)]));
    let state = instance.state("none").await;
    assert_eq!((state.sold, state.busy), (CAP as i64, 100), "{state:?}");
}

/// A sold-out answer is safe to repeat: its record is kept briefly
/// ([`stocklock::ledger::SOLD_OUT_KEEP`]), a sale's for the whole TTL.
#[tokio::test]
async fn a_sold_out_record_is_kept_briefly_and_a_sale_for_the_ttl() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let instance = InProcess::start(&store, "t", Chaos::off()).await;
    let mut conn = helpers::redis_conn(&redis.url()).await;
    instance.reset("lua", 1, 0).await;
    for id in ["first", "second"] {
        instance
            .get(&format!("/deductStock/lua?sku=lua&request_id={id}"))
            .await;
    }
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    let score = |id: &str| {
        redis::cmd("ZSCORE")
            .arg("request_times:{lua}")
            .arg(id)
            .to_owned()
    };
    let sold: f64 = score("first").query_async(&mut conn).await.unwrap();
    let sold_out: f64 = score("second").query_async(&mut conn).await.unwrap();
    // The score is when the id counts as first seen: a sale's is now, a
    // sold-out answer's a TTL less the keep before, so it is forgotten then.
    let ttl = stocklock::ledger::DEFAULT_REQUEST_TTL.as_millis() as i64;
    let keep = stocklock::ledger::SOLD_OUT_KEEP.as_millis() as i64;
    assert!((now_ms() - sold as i64).abs() < 5_000, "{sold}");
    assert!(
        (now_ms() - (ttl - keep) - sold_out as i64).abs() < 5_000,
        "{sold_out}"
    );
    // A lock variant's sold-out record, settled after its claim: the same.
    instance.reset("none", 0, 0).await;
    instance
        .get("/deductStock/none?sku=none&request_id=third")
        .await;
    let third: f64 = redis::cmd("ZSCORE")
        .arg("request_times:{none}")
        .arg("third")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        (now_ms() - (ttl - keep) - third as i64).abs() < 5_000,
        "{third}"
    );
    // Within the keep, the retry repeats the answer.
    let (status, body) = instance
        .get("/deductStock/lua?sku=lua&request_id=second")
        .await;
    assert_eq!(
        (status.as_u16(), &body["replayed"]),
        (409, &json!(true)),
        "{body}"
    );
}

/// The Redis `up` starts (the tests' too) has a memory limit and evicts
/// nothing: at the limit a write fails, the ledger stays whole; the state
/// shows how close it is.
#[tokio::test]
async fn our_redis_has_a_memory_limit_never_evicts_and_the_state_shows_it() {
    let redis = helpers::redis().await;
    let mut conn = helpers::redis_conn(&redis.url()).await;
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut conn)
        .await
        .unwrap();
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .map(str::trim)
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(field("maxmemory"), (1u64 << 30).to_string(), "{info}");
    assert_eq!(field("maxmemory_policy"), "noeviction", "{info}");

    let store = Store::open(&redis.url()).unwrap();
    let instance = InProcess::start(&store, "t", Chaos::off()).await;
    instance.reset("lua", 5, 0).await;
    let (status, state) = instance.get("/api/state?sku=lua").await;
    assert_eq!(status, 200, "{state}");
    assert_eq!(
        state["redis_memory"]["max_bytes"],
        json!(1u64 << 30),
        "{state}"
    );
    assert!(
        state["redis_memory"]["used_bytes"].as_u64().unwrap() > 0,
        "{state}"
    );
    assert_eq!(state["sold"], json!(0), "the snapshot beside it: {state}");
}
