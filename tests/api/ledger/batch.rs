//! `lua-batch`'s coalesced script against `lua`'s one-buyer sale, on a
//! real Redis. The batch decides its buyers on one read of the stock and
//! writes their sales together; what it answers and what it leaves in
//! Redis must be exactly what `deduct.lua` gives when the same buyers come
//! one after the other in queue order: on random batches (ids repeated,
//! retried, claimed by a live or a dead attempt, no id at all, too many
//! ids for the SKU's cap) over random stocks, and on the batch that
//! straddles the last units.

use std::collections::BTreeMap;

use redis::aio::MultiplexedConnection;
use stocklock::ledger::reset_sku;
use stocklock::store::Keys;
use stocklock::variants::sale_scripts;

use crate::helpers;

/// How long ids are remembered (ms), and a sold-out answer's record.
const TTL_MS: u64 = 3_600_000;
const KEEP_MS: u64 = 10_000;

/// One buyer's seven numbers, without the moment the script ran (`started`,
/// Redis's clock: one per batch, one per call of `deduct.lua`).
fn without_moment(numbers: &[i64]) -> Vec<i64> {
    let mut numbers = numbers.to_vec();
    numbers[3] = 0;
    numbers
}

/// `deduct.lua` for each of `ids` in turn, as `lua` sells one buyer: their
/// answers.
async fn one_by_one(
    conn: &mut MultiplexedConnection,
    keys: &Keys,
    cap: u64,
    ids: &[String],
) -> Vec<Vec<i64>> {
    let mut answers = Vec::new();
    for id in ids {
        let mut call = sale_scripts::ONE.prepare_invoke();
        for key in sale_scripts::keys(keys) {
            call.key(key);
        }
        call.arg("i")
            .arg(id)
            .arg("1")
            .arg("")
            .arg(TTL_MS)
            .arg("")
            .arg(cap)
            .arg(KEEP_MS)
            .arg("");
        let numbers: Vec<i64> = call.invoke_async(conn).await.unwrap();
        answers.push(without_moment(&numbers));
    }
    answers
}

/// `deduct_batch.lua` once for all of `ids`, as `lua-batch` sends a batch:
/// each buyer's answer, or the script's error.
async fn in_one_call(
    conn: &mut MultiplexedConnection,
    keys: &Keys,
    cap: u64,
    ids: &[String],
) -> redis::RedisResult<Vec<Vec<i64>>> {
    let mut call = sale_scripts::BATCH.prepare_invoke();
    for key in sale_scripts::keys(keys) {
        call.key(key);
    }
    call.arg("i").arg(TTL_MS).arg(cap).arg(KEEP_MS);
    for id in ids {
        call.arg(id);
    }
    let numbers: Vec<i64> = call.invoke_async(conn).await?;
    assert_eq!(numbers.len(), 7 * ids.len(), "seven numbers a buyer");
    Ok(numbers.chunks(7).map(without_moment).collect())
}

/// What a sale may write of `keys`, as Redis holds it; the ids' first-seen
/// times by id only (their scores are Redis's clock at each call).
async fn written(conn: &mut MultiplexedConnection, keys: &Keys) -> Vec<String> {
    let stock: Option<String> = redis::cmd("GET")
        .arg(&keys.stock)
        .query_async(conn)
        .await
        .unwrap();
    let units: Option<Vec<u8>> = redis::cmd("GET")
        .arg(&keys.units)
        .query_async(conn)
        .await
        .unwrap();
    let mut dump = vec![format!("stock {stock:?}"), format!("units {units:?}")];
    for (name, key) in [
        ("ledger", &keys.ledger),
        ("served", &keys.served),
        ("requests", &keys.requests),
    ] {
        let mut fields: BTreeMap<String, String> = redis::cmd("HGETALL")
            .arg(key)
            .query_async(conn)
            .await
            .unwrap();
        // Set by the reset from Redis's clock: each SKU its own.
        fields.remove("epoch");
        dump.push(format!("{name} {fields:?}"));
    }
    let mut ids: Vec<String> = redis::cmd("ZRANGE")
        .arg(&keys.request_times)
        .arg(0)
        .arg(-1)
        .query_async(conn)
        .await
        .unwrap();
    ids.sort();
    dump.push(format!("request_times {ids:?}"));
    dump
}

/// Redis's clock, in ms.
async fn now_ms(conn: &mut MultiplexedConnection) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    secs * 1000 + micros / 1000
}

/// A SKU as one random case left it before its batch: `stock` units of
/// `initial` left, some ids already sold to (`sold`), and claims of ids by
/// attempts under way (`live`) or dead (`dead`).
struct Before {
    initial: i64,
    stock: i64,
    sold: Vec<String>,
    live: Vec<String>,
    dead: Vec<String>,
}

/// Puts `keys`'s SKU in the state `before` describes, the live claims'
/// deadline at `now` + 10 min.
async fn prepare(
    conn: &mut MultiplexedConnection,
    keys: &Keys,
    before: &Before,
    cap: u64,
    now: u64,
) {
    reset_sku(conn, keys, before.initial, 0, false)
        .await
        .unwrap();
    one_by_one(conn, keys, cap, &before.sold).await;
    for (ids, deadline) in [(&before.live, now + 600_000), (&before.dead, 1)] {
        for id in ids {
            let _: () = redis::pipe()
                .hset(&keys.requests, id, format!("pending:tok:{deadline}"))
                .zadd(&keys.request_times, id, now)
                .query_async(conn)
                .await
                .unwrap();
        }
    }
    let _: () = redis::cmd("SET")
        .arg(&keys.stock)
        .arg(before.stock)
        .query_async(conn)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_coalesced_batch_answers_and_writes_what_one_buyer_at_a_time_would() {
    let redis = helpers::redis().await;
    let mut conn = helpers::redis_conn(&redis.url()).await;
    let mut rng = fastrand::Rng::with_seed(40);
    let (mut straddled, mut replayed, mut busy, mut bare) = (0, 0, 0, 0);
    for case in 0..300 {
        let pool: Vec<String> = (0..8).map(|i| format!("id{i}")).collect();
        let pick = |rng: &mut fastrand::Rng| pool[rng.usize(..pool.len())].clone();
        let initial = rng.i64(1..=12);
        let mut before = Before {
            initial,
            stock: 0,
            sold: (0..rng.usize(0..3)).map(|_| pick(&mut rng)).collect(),
            live: (0..rng.usize(0..2)).map(|_| pick(&mut rng)).collect(),
            dead: (0..rng.usize(0..2)).map(|_| pick(&mut rng)).collect(),
        };
        // What the earlier sales left, sometimes less (another variant
        // oversold: the stock below zero).
        before.stock = match rng.u8(..10) {
            0 => -rng.i64(1..=2),
            _ => rng.i64(0..=(initial - before.sold.len() as i64).max(0)),
        };
        let cap = if rng.u8(..4) == 0 {
            rng.u64(1..=4)
        } else {
            1000
        };
        // One batch in four has no ids at all (the script's hot path).
        let without_ids = rng.u8(..4) == 0;
        let ids: Vec<String> = (0..rng.usize(1..=10))
            .map(|_| match rng.u8(..5) {
                _ if without_ids => String::new(),
                0 => String::new(),
                _ => pick(&mut rng),
            })
            .collect();
        let (one, batch) = (
            Keys::tagged_with(&format!("one-{case}")),
            Keys::tagged_with(&format!("batch-{case}")),
        );
        let now = now_ms(&mut conn).await;
        prepare(&mut conn, &one, &before, cap, now).await;
        prepare(&mut conn, &batch, &before, cap, now).await;
        assert_eq!(
            written(&mut conn, &one).await,
            written(&mut conn, &batch).await,
            "case {case}: the two SKUs start alike"
        );
        let expected = one_by_one(&mut conn, &one, cap, &ids).await;
        let got = in_one_call(&mut conn, &batch, cap, &ids).await.unwrap();
        let context = format!(
            "case {case}: stock {} of {initial}, sold to {:?}, live claims {:?}, dead {:?}, cap {cap}, batch {ids:?}",
            before.stock, before.sold, before.live, before.dead
        );
        assert_eq!(got, expected, "{context}");
        assert_eq!(
            written(&mut conn, &batch).await,
            written(&mut conn, &one).await,
            "{context}"
        );
        let kinds: Vec<i64> = expected.iter().map(|answer| answer[0]).collect();
        straddled += usize::from(kinds.contains(&1) && kinds.contains(&0));
        replayed += usize::from(kinds.contains(&2) || kinds.contains(&3));
        busy += usize::from(kinds.contains(&5) || kinds.contains(&7));
        bare += usize::from(without_ids && kinds.contains(&1) && kinds.contains(&0));
    }
    // The random cases reached what they are for.
    assert!(
        straddled > 10 && replayed > 10 && busy > 10 && bare > 10,
        "straddling {straddled} ({bare} without ids), replaying {replayed}, busy {busy}"
    );
}

/// The last units: a batch of six buyers for the last two units. The first
/// two get them (the top one first), the other four are sold out, all in
/// one call; each id then replays its own answer, and nothing sells again.
#[tokio::test]
async fn a_batch_that_straddles_the_last_units_sells_them_and_refuses_the_rest() {
    let redis = helpers::redis().await;
    let mut conn = helpers::redis_conn(&redis.url()).await;
    let keys = Keys::tagged_with("straddle");
    reset_sku(&mut conn, &keys, 5, 0, false).await.unwrap();
    one_by_one(&mut conn, &keys, 1000, &vec![String::new(); 3]).await;
    let ids: Vec<String> = (1..=6).map(|i| format!("s{i}")).collect();
    let answers = in_one_call(&mut conn, &keys, 1000, &ids).await.unwrap();
    let kinds_units_remaining: Vec<[i64; 3]> = answers
        .iter()
        .map(|answer| [answer[0], answer[1], answer[2]])
        .collect();
    assert_eq!(
        kinds_units_remaining,
        [
            [1, 2, 1],
            [1, 1, 0],
            [0, 0, 0],
            [0, 0, 0],
            [0, 0, 0],
            [0, 0, 0]
        ],
        "sold, sold, then sold out"
    );
    let again = in_one_call(&mut conn, &keys, 1000, &ids).await.unwrap();
    let replays: Vec<[i64; 3]> = again
        .iter()
        .map(|answer| [answer[0], answer[1], answer[2]])
        .collect();
    assert_eq!(
        replays,
        [
            [2, 2, 1],
            [2, 1, 0],
            [3, 0, 0],
            [3, 0, 0],
            [3, 0, 0],
            [3, 0, 0]
        ],
        "each id replays its own answer"
    );
    let ledger: BTreeMap<String, String> = redis::cmd("HGETALL")
        .arg(&keys.ledger)
        .query_async(&mut conn)
        .await
        .unwrap();
    let field = |name: &str| ledger.get(name).map(String::as_str);
    assert_eq!(
        (field("sold"), field("duplicates"), field("replays")),
        (Some("5"), None, Some("6")),
        "{ledger:?}"
    );
    let stock: i64 = redis::cmd("GET")
        .arg(&keys.stock)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(stock, 0);
}
