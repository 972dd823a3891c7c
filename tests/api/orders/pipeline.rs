//! The order pipeline end to end on a real stack (nginx, two instances,
//! Redis, PostgreSQL): the race on `lua-stream` makes exactly one order per
//! unit and `stocklock reconcile` agrees (and disagrees once a row is
//! gone); reservations expire and give their unit back exactly once.

use std::time::Duration;

use serde_json::Value;
use stocklock::orders::expiry::{GiveBack, give_back};
use stocklock::store::{Keys, Store};

use crate::helpers::{Stack, burst, within};

/// A stack with orders on, or `None` (SKIPPED; a failure under CI=true)
/// without PostgreSQL.
async fn stack_with_orders(pay_within: &str) -> Option<Stack> {
    stack_with(&["--pay-within", pay_within]).await
}

/// A stack of two instances with orders on and `extra` flags, or `None`
/// (SKIPPED; a failure under CI=true) without PostgreSQL.
pub(super) async fn stack_with(extra: &[&str]) -> Option<Stack> {
    if !stocklock::up::postgres::installed() {
        crate::helpers::missing_tool("PostgreSQL is not installed (scripts/deps.sh postgresql)");
        return None;
    }
    let args: Vec<&str> = ["--orders", "on"].iter().chain(extra).copied().collect();
    Some(Stack::start_with(2, None, &args).await)
}

/// The stack's orders' database.
pub(super) async fn database(stack: &Stack) -> stocklock::orders::Client {
    stocklock::orders::connect(&stack.postgres.as_ref().unwrap().url)
        .await
        .unwrap()
}

/// A connection to the stack's Redis.
pub(super) async fn redis(stack: &Stack) -> stocklock::store::Conn {
    let store = Store::open(stack.redis_url.as_deref().unwrap()).unwrap();
    store.conn().await.unwrap()
}

/// Messages of `keys`' order stream delivered to a worker and not acked.
pub(super) async fn pending(conn: &mut stocklock::store::Conn, keys: &Keys) -> usize {
    let pending: redis::streams::StreamPendingReply = redis::cmd("XPENDING")
        .arg(&keys.orders)
        .arg("workers")
        .query_async(conn)
        .await
        .unwrap();
    pending.count()
}

/// `stocklock reconcile` on the stack's stores: its exit code and JSON.
pub(super) async fn reconcile(stack: &Stack, sku: &str) -> (i32, Value) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
        .args(["reconcile", "--json", "--sku", sku, "--wait", "10s"])
        .args(["--redis-url", stack.redis_url.as_deref().unwrap()])
        .args(["--postgres-url", &stack.postgres.as_ref().unwrap().url])
        .output()
        .await
        .unwrap();
    let json: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|err| panic!("{err}: {}", String::from_utf8_lossy(&output.stderr)));
    (output.status.code().unwrap_or(-1), json[0].clone())
}

#[tokio::test]
async fn the_lua_stream_race_makes_one_order_per_unit_and_reconcile_agrees() {
    within(Duration::from_secs(120), async {
        let Some(stack) = stack_with_orders("10m").await else {
            return;
        };
        stack.reset("lua-stream", 50).await;
        let url = format!("{}/deductStock/lua-stream?sku=lua-stream", stack.url);
        let tally = burst(stack.http(), &url, 400, 64).await;
        assert_eq!(tally.count(200), 50, "{tally:?}");
        assert_eq!(tally.count(409), 350, "{tally:?}");
        assert_eq!(tally.by_instance.len(), 2, "both instances sold: {tally:?}");
        let (code, r) = reconcile(&stack, "lua-stream").await;
        assert_eq!(code, 0, "{r}");
        assert_eq!(
            (r["sold"].as_i64(), r["pending_payment"].as_i64()),
            (Some(50), Some(50)),
            "{r}"
        );
        for list in ["lost", "phantom", "ordered_twice", "unreturned"] {
            assert_eq!(r[list], serde_json::json!([]), "{list}: {r}");
        }
        let db = database(&stack).await;
        let row = db
            .query_one(
                "SELECT count(*), count(DISTINCT unit), count(DISTINCT instance)
                 FROM orders WHERE sku = 'lua-stream'",
                &[],
            )
            .await
            .unwrap();
        let counts: (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
        assert_eq!((counts.0, counts.1), (50, 50), "one order per unit");
        // A lost order is found: the row of unit 7 goes, reconcile says so.
        db.execute(
            "DELETE FROM orders WHERE sku = 'lua-stream' AND unit = 7",
            &[],
        )
        .await
        .unwrap();
        let (code, r) = reconcile(&stack, "lua-stream").await;
        assert_eq!(code, 2, "{r}");
        assert_eq!(r["lost"], serde_json::json!([7]), "{r}");

        // `load` reconciles an order variant's run itself.
        let json = tempfile::NamedTempFile::new().unwrap();
        let load = tokio::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
            .args([
                "load",
                "--variant",
                "lua-stream",
                "--stock",
                "50",
                "--requests",
                "400",
            ])
            .args([
                "--target",
                &stack.url,
                "--admin-token",
                &stack.token,
                "--check",
            ])
            .arg("--json")
            .arg(json.path())
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&load.stdout);
        assert!(load.status.success(), "{stdout}");
        assert!(stdout.contains("orders lua-stream: 50 orders"), "{stdout}");
        let report: Value = serde_json::from_slice(&std::fs::read(json.path()).unwrap()).unwrap();
        let orders = &report["runs"][0]["orders"];
        assert_eq!(orders["clean"], true, "{orders}");
        assert_eq!(orders["orders"], 50, "{orders}");
        assert!(orders["lag_p99_ms"].as_f64().unwrap() >= orders["lag_p50_ms"].as_f64().unwrap());
        stack.stop().await;
    })
    .await;
}

#[tokio::test]
async fn unpaid_reservations_give_their_unit_back_once_and_paid_ones_never() {
    within(Duration::from_secs(120), async {
        // A deadline no slow machine reaches while the test pays: the test
        // moves the unpaid ones' deadline itself once the ten are paid.
        let Some(stack) = stack_with_orders("10m").await else {
            return;
        };
        let sku = "lua-stream";
        stack.reset(sku, 20).await;
        let mut tokens = Vec::new();
        for i in 0..20 {
            let url = format!(
                "{}/deductStock/lua-stream?sku={sku}&request_id=r{i}",
                stack.url
            );
            let response = stack.http().get(&url).send().await.unwrap();
            assert_eq!(response.status(), 200, "r{i}");
            let body: Value = response.json().await.unwrap();
            tokens.push(body["order_token"].as_str().unwrap().to_owned());
        }
        // Each order as its buyer finds it, once the worker wrote it.
        let mut orders = Vec::new();
        for (i, token) in tokens.iter().enumerate() {
            let order = loop {
                if let Some(order) = stack
                    .client
                    .find_order(sku, &format!("r{i}"), token)
                    .await
                    .unwrap()
                {
                    break order;
                }
                // The worker's pace: a moment after the sale.
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            assert_eq!(order.status, "pending_payment");
            // The deadline is the configured one (10 minutes) after the sale.
            let left = order.pay_within_ms.unwrap();
            assert!((540_000..=600_000).contains(&left), "{order:?}");
            orders.push(order);
        }
        for (order, token) in orders[..10].iter().zip(&tokens) {
            assert_eq!(stack.client.pay(order.id, token).await, 200, "{order:?}");
        }
        assert_eq!(stack.state(sku).await.remaining, 0);
        // The deadline passes (the test moves it to now); the instances' own
        // passes expire the ten and give their units back.
        let db = database(&stack).await;
        let moved = db
            .execute(
                "UPDATE orders SET pay_by = clock_timestamp()
                 WHERE sku = $1 AND status = 'pending_payment'",
                &[&sku],
            )
            .await
            .unwrap();
        assert_eq!(moved, 10);
        let view = loop {
            let view = stack.client.orders(sku).await.unwrap();
            assert!(view.summary.expired <= 10, "{view:?}");
            // Cancelled first, then given back: wait for both.
            if view.summary.expired == 10 && stack.state(sku).await.returned == 10 {
                break view;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(
            (view.summary.paid, view.summary.reserved),
            (10, 0),
            "{view:?}"
        );
        assert!(view.reconciliation.clean(), "{}", view.verdict);
        let state = stack.state(sku).await;
        assert_eq!(
            (state.remaining, state.returned, state.sold),
            (10, 10, 20),
            "{state:?}"
        );
        assert_eq!(state.oversold, 0);
        // A second pass, and a retried return of an expired sale, change nothing.
        let again = stack.client.expire_orders().await.unwrap();
        assert_eq!((again.expired, again.returned), (0, 0), "{again:?}");
        let mut conn = redis(&stack).await;
        let expired = &orders[10];
        let keys = Keys::tagged_with(sku);
        let row = db
            .query_one(
                "SELECT epoch, sale, status FROM orders WHERE id = $1",
                &[&expired.id],
            )
            .await
            .unwrap();
        assert_eq!(row.get::<_, String>(2), "expired");
        let retried = give_back(&mut conn, &keys, row.get(0), row.get(1), expired.unit)
            .await
            .unwrap();
        assert_eq!(retried, GiveBack::Again);
        assert_eq!(stack.state(sku).await.remaining, 10);
        // Too late to pay an expired one; a paid one stays paid.
        assert_eq!(stack.client.pay(expired.id, &tokens[10]).await, 409);
        assert_eq!(stack.client.pay(orders[0].id, &tokens[0]).await, 200);
        // The units given back sell again, each to a new order.
        let url = format!("{}/deductStock/lua-stream?sku={sku}", stack.url);
        let tally = burst(stack.http(), &url, 15, 4).await;
        assert_eq!(tally.count(200), 10, "{tally:?}");
        let (code, r) = reconcile(&stack, sku).await;
        assert_eq!(code, 0, "{r}");
        assert_eq!(
            (r["sold"].as_i64(), r["stock"].as_i64()),
            (Some(30), Some(0)),
            "{r}"
        );
        stack.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_dead_consumers_messages_are_claimed_and_written_by_a_live_worker() {
    within(Duration::from_secs(120), async {
        let Some(stack) = stack_with_orders("10m").await else {
            return;
        };
        // A worker of the group that took three messages and died: they
        // sit in its pending list, never acked.
        let sku = "lua-stream";
        stack.reset(sku, 10).await;
        let mut conn = redis(&stack).await;
        let keys = Keys::tagged_with(sku);
        let ghost_sales = [101i64, 102, 103];
        // The stream, its group and the SKU in the workers' registry; the
        // ghost's three messages added and read by it in one atomic step,
        // before any live worker can read them.
        stocklock::orders::worker::ensure_group(&mut conn, &keys)
            .await
            .unwrap();
        stocklock::orders::register(&mut conn, sku).await.unwrap();
        let epoch = crate::helpers::epoch(&mut conn, &keys).await;
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (i, sale) in ghost_sales.iter().enumerate() {
            let message = stocklock::orders::OrderMessage {
                sku: sku.to_owned(),
                epoch,
                unit: 1000 + i as i64,
                sale: *sale,
                request_id: None,
                instance: "ghost".to_owned(),
                at_ms: 0,
                token: None,
                schedule: None,
            };
            pipe.xadd(&keys.orders, "*", &message.fields()).ignore();
        }
        pipe.cmd("XREADGROUP")
            .arg("GROUP")
            .arg("workers")
            .arg("ghost")
            .arg("COUNT")
            .arg(3)
            .arg("STREAMS")
            .arg(&keys.orders)
            .arg(">")
            .ignore();
        let () = pipe.query_async(&mut conn).await.unwrap();
        assert_eq!(
            pending(&mut conn, &keys).await,
            3,
            "the ghost holds its three"
        );
        // Past --claim-idle (5 s by default) a live worker claims them.
        let db = database(&stack).await;
        let written = loop {
            let row = db
                .query_one(
                    "SELECT count(*), min(instance) FROM orders WHERE sku = $1 AND sale = ANY($2)",
                    &[&sku, &ghost_sales.to_vec()],
                )
                .await
                .unwrap();
            if row.get::<_, i64>(0) == 3 {
                break row.get::<_, String>(1);
            }
            // The claim comes after an idle time, by design: look again.
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_eq!(
            written, "ghost",
            "the ghost's messages, as it received them"
        );
        assert_eq!(pending(&mut conn, &keys).await, 0, "acked once written");
        stack.stop().await;
    })
    .await;
}
