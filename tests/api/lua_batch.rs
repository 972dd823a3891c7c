//! `lua-batch` on the whole stack (two instances behind nginx, one Redis):
//! every buyer of a batch gets its own unit or its own sold-out answer, ids
//! replay, and a batch cut off by a Redis pause leaves every buyer in doubt
//! until its id resolves.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use stocklock::wire::StateSnapshot;
use tokio::sync::Barrier;

use crate::helpers::{Stack, redis_conn, until_paused, within};

/// Whether an answer was replayed from its request id's record (the
/// field is left out when false).
fn replayed(body: &Value) -> bool {
    body["replayed"].as_bool().unwrap_or(false)
}

/// One request of `sku` with id `id`: its status and JSON body.
async fn buy(stack: &Stack, sku: &str, id: &str) -> (u16, Value) {
    let url = format!(
        "{}/deductStock/lua-batch?sku={sku}&request_id={id}",
        stack.url
    );
    let response = stack.http().get(&url).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// `n` buyers (ids `{prefix}{i}`), `concurrency` at a time, released
/// together: each id's status and body.
async fn crowd(
    stack: &Arc<Stack>,
    sku: &str,
    prefix: &str,
    n: usize,
    concurrency: usize,
) -> BTreeMap<String, (u16, Value)> {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let barrier = Arc::new(Barrier::new(concurrency));
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let (stack, next, barrier) = (stack.clone(), next.clone(), barrier.clone());
        let (sku, prefix) = (sku.to_owned(), prefix.to_owned());
        workers.push(tokio::spawn(async move {
            let mut answers = Vec::new();
            barrier.wait().await;
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    return answers;
                }
                let id = format!("{prefix}{i}");
                answers.push((id.clone(), buy(&stack, &sku, &id).await));
            }
        }));
    }
    let mut all = BTreeMap::new();
    for worker in workers {
        all.extend(worker.await.unwrap());
    }
    all
}

/// Pauses the stack's Redis for `ms` (chaos `pause_redis`) and returns
/// once the pause holds, with the connection that saw it (made before it).
async fn pause_redis(stack: &Stack, ms: u64) -> redis::aio::MultiplexedConnection {
    let mut probe = redis_conn(stack.redis_url.as_deref().unwrap()).await;
    stack
        .chaos(json!({"action": "pause_redis", "ms": ms}))
        .await;
    until_paused(&mut probe).await;
    probe
}

/// The ledger of `sku`: its whole `stock` sold, once each, nothing left.
async fn sold_out_exactly(stack: &Stack, sku: &str, stock: i64) -> StateSnapshot {
    let state = stack.state(sku).await;
    assert_eq!(
        (
            state.sold,
            state.remaining,
            state.oversold,
            state.duplicates
        ),
        (stock, 0, 0, 0),
        "{state:?}"
    );
    state
}

/// The batch counters summed over the stack's instances: (calls, buyers).
pub(crate) async fn batches(stack: &Stack) -> (u64, u64) {
    let mut total = (0, 0);
    for instance in &stack.instances {
        let samples = crate::dashboard::metrics::metrics_of(stack, &instance.url).await;
        let value = |name: &str| -> u64 {
            samples
                .iter()
                .find(|(series, _)| series.split('{').next() == Some(name))
                .map(|(_, value)| *value as u64)
                .unwrap_or_else(|| panic!("{name} missing from {}", instance.url))
        };
        total.0 += value("stocklock_batch_calls_total");
        total.1 += value("stocklock_batch_buyers_total");
    }
    total
}

const STOCK: i64 = 50;
const BUYERS: usize = 400;
const AT_ONCE: usize = 64;

#[tokio::test]
async fn a_flash_sale_in_batches_sells_each_unit_once_and_every_id_replays() {
    within(Duration::from_secs(120), async {
        let stack = Arc::new(Stack::start(2, None).await);
        let sku = "batch-sale";
        stack.reset(sku, STOCK).await;
        // A short pause of Redis as the sale opens (well inside the 1 s an
        // instance waits for an answer): each instance's first call waits
        // in it, and the buyers who arrive meanwhile queue behind it, so
        // batches of many form on any machine, however fast.
        pause_redis(&stack, 300).await;
        let before = batches(&stack).await;
        let answers = crowd(&stack, sku, "r", BUYERS, AT_ONCE).await;
        let after = batches(&stack).await;

        let mut sold = Vec::new();
        let mut sold_out = 0;
        for (id, (status, body)) in &answers {
            match status {
                200 => sold.push(body["unit"].as_i64().unwrap()),
                409 => sold_out += 1,
                _ => panic!("{id}: {status} {body}"),
            }
            assert!(!replayed(body), "{id}: {body}");
        }
        sold.sort_unstable();
        assert_eq!(sold, (1..=STOCK).collect::<Vec<_>>(), "every unit once");
        assert_eq!(sold_out, BUYERS - STOCK as usize);
        let state = sold_out_exactly(&stack, sku, STOCK).await;
        assert_eq!(state.per_instance.values().sum::<i64>(), BUYERS as i64);
        // Fewer calls than buyers: the queued ones went together.
        let (calls, buyers) = (after.0 - before.0, after.1 - before.1);
        eprintln!("{buyers} buyers in {calls} calls");
        assert_eq!(buyers, BUYERS as u64);
        assert!(calls < buyers, "{calls} calls for {buyers} buyers");

        // A retry of every id replays its answer; nothing sells again.
        let retried = crowd(&stack, sku, "r", BUYERS, AT_ONCE).await;
        for (id, (status, body)) in &retried {
            let (first_status, first) = &answers[id];
            assert_eq!(status, first_status, "{id}: {body}");
            assert_eq!(body["unit"], first["unit"], "{id}: {body}");
            assert!(replayed(body), "{id}: {body}");
        }
        let state = stack.state(sku).await;
        assert_eq!(
            (state.sold, state.replays),
            (STOCK, BUYERS as i64),
            "{state:?}"
        );
        Arc::into_inner(stack).unwrap().stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_batch_cut_off_by_a_redis_pause_is_unknown_for_all_and_every_id_resolves() {
    within(Duration::from_secs(120), async {
        let stack = Arc::new(Stack::start(2, None).await);
        let sku = "batch-cut";
        let stock = 10;
        stack.reset(sku, stock).await;
        // Longer than an instance waits for an answer (1 s), twice over:
        // the first call of each instance and the batch queued behind it
        // are both sent into the pause and both go unanswered.
        let mut probe = pause_redis(&stack, 2500).await;
        let buyers = 30;
        let before = batches(&stack).await;
        let answers = crowd(&stack, sku, "c", buyers, buyers).await;
        let after = batches(&stack).await;
        // Two calls an instance: a first buyer alone, the rest together.
        let calls = after.0 - before.0;
        assert!(calls < buyers as u64, "{calls} calls for {buyers} buyers");
        for (id, (status, body)) in &answers {
            assert_eq!(*status, 503, "{id}: {body}");
            assert_eq!(body["outcome"], "unknown", "{id}: {body}");
        }
        // Redis is back (a PING answers). Each id now resolves: from its
        // record if its call ran once Redis woke (a replay), or decided
        // now if it never reached Redis; either way once, and for good.
        let _: String = redis::cmd("PING").query_async(&mut probe).await.unwrap();
        let mut resolved = BTreeMap::new();
        for id in answers.keys() {
            let (status, body) = buy(&stack, sku, id).await;
            assert!(matches!(status, 200 | 409), "{id}: {status} {body}");
            resolved.insert(id.clone(), (status, body));
        }
        let ran = resolved.values().filter(|(_, body)| replayed(body)).count();
        eprintln!("{ran} of {buyers} cut-off buyers' calls ran once Redis woke");
        let mut sold: Vec<i64> = resolved
            .values()
            .filter(|(status, _)| *status == 200)
            .map(|(_, body)| body["unit"].as_i64().unwrap())
            .collect();
        sold.sort_unstable();
        assert_eq!(sold, (1..=stock).collect::<Vec<_>>(), "each unit to one id");
        for (id, (status, first)) in &resolved {
            let (again, body) = buy(&stack, sku, id).await;
            assert_eq!(
                (again, &body["unit"]),
                (*status, &first["unit"]),
                "{id}: {body}"
            );
            assert!(replayed(&body), "{id}: {body}");
        }
        let state = sold_out_exactly(&stack, sku, stock).await;
        assert_eq!(state.unknown, buyers as i64, "{state:?}");
        Arc::into_inner(stack).unwrap().stop().await;
    })
    .await;
}
