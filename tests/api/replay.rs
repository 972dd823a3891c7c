//! `stocklock replay`: every counterexample of the checker that the gates
//! can stand for, driven step for step through the real code on a live
//! stack, breaks live what it breaks in the model.

use std::time::Duration;

use stocklock::check;

use crate::helpers::{self, Stack};

/// The cells whose replay fails the lock's Redis over: each on a stack
/// of its own, with a replica, Sentinels, and the gates on a Redis apart.
const FAILOVER_CELLS: [(&str, &str); 4] = [
    ("token", "failover"),
    ("token", "failover-wait"),
    ("watchdog", "failover"),
    ("fenced", "failover"),
];

/// The cell whose replay kills and restarts Redlock nodes: on a stack of
/// its own.
const NODE_CELL: (&str, &str) = ("redlock", "redlock-restart-without-persistence");

/// The counterexample cells of the order pipeline: replayed on a stack
/// with the orders on.
const ORDER_CELLS: [(&str, &str); 3] = [
    ("lua-then-queue", "crash-before-enqueue"),
    ("lua-then-queue", "redis-data-loss"),
    ("lua-stream", "redis-data-loss"),
];

/// `replay --all`: every counterexample of the matrix replayed live, each
/// on the stack it needs (the order cells on one with the pipeline on, the
/// cell that kills Redlock nodes and each failover cell on one of its
/// own); each breaks what the model's trace breaks, and none is left out.
#[tokio::test]
async fn every_counterexample_of_the_matrix_breaks_live_as_in_the_model() {
    let _turn = helpers::stack_turn().await;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("all.json");
    let history = dir.path().join("all.jsonl");
    let ran = helpers::within(
        Duration::from_secs(600),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
            .args(["replay", "--all", "--json"])
            .arg(&json)
            .arg("--history")
            .arg(&history)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap();
    let out = String::from_utf8_lossy(&ran.stdout);
    assert!(
        ran.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let all: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let cells = all["cells"].as_array().unwrap();
    let name = |cell: &serde_json::Value| {
        (
            cell["variant"].as_str().unwrap().to_owned(),
            cell["scenario"].as_str().unwrap().to_owned(),
        )
    };
    for cell in cells {
        assert_eq!(cell["agrees"], true, "{:?} disagrees: {cell:#}", name(cell));
        // The history checker judged the replay too, from what its buyers
        // were told: an oversell is unsafe there, the rest (a lock nobody
        // frees, a sale with no order) fits one stock.
        assert_eq!(cell["disagreement"], serde_json::Value::Null, "{cell:#}");
        let judged = match cell["property"].as_str().unwrap() {
            "every unit sold at most once" => "unsafe",
            _ => "linearizable",
        };
        assert!(
            cell["history"].as_str().unwrap().starts_with(judged),
            "{cell:#}"
        );
    }
    // The histories written are the ones judged: `history check` finds
    // the oversold replays unsafe (exit 2).
    let checked = std::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
        .args(["history", "check"])
        .arg(&history)
        .output()
        .unwrap();
    assert_eq!(checked.status.code(), Some(2), "{checked:?}");
    let text = std::fs::read_to_string(&history).unwrap();
    assert!(
        text.contains("\"sku\":\"replay-lua-stream-redis-data-loss/lua-stream-redis-data-loss#2\""),
        "the SKU stocked again after Redis lost its data is a new stock"
    );
    let played: Vec<(String, String)> = cells.iter().map(name).collect();
    for (variant, scenario) in ORDER_CELLS.iter().chain([&NODE_CELL]) {
        let cell = (variant.to_string(), scenario.to_string());
        assert!(played.contains(&cell), "{cell:?} not replayed: {out}");
    }
    assert_eq!(cells.len(), 30, "{out}");
    // The cell `(variant, scenario)`, and how many of its live steps say `said`.
    let cell = |(variant, scenario): (&str, &str)| {
        cells
            .iter()
            .find(|c| name(c) == (variant.to_owned(), scenario.to_owned()))
            .unwrap_or_else(|| panic!("{variant} in {scenario} not replayed: {out}"))
    };
    let steps_saying = |cell: &serde_json::Value, said: &str| {
        let steps = cell["steps"].as_array().unwrap().iter();
        steps
            .filter(|s| s["live"].as_str().unwrap().contains(said))
            .count()
    };
    // The failover cells: the master killed and the replica promoted where
    // the model has it, and the unit sold twice seen in the answers.
    for failover in FAILOVER_CELLS {
        let cell = cell(failover);
        assert_eq!(steps_saying(cell, "Sentinel promoted"), 1, "{cell:#}");
        let live = cell["live"].as_str().unwrap();
        assert!(live.contains("unit 2 (A, B)"), "{cell:#}");
    }
    // The Redlock nodes were killed and started again where the model says.
    let node_cell = cell(NODE_CELL);
    let restarts = steps_saying(node_cell, "starts again, empty");
    assert_eq!(restarts, 2, "{node_cell:#}");
    let not_replayed = all["not_replayed"].as_array().unwrap();
    assert!(not_replayed.is_empty(), "cells left out: {out}");
    // Every counterexample of the matrix was replayed.
    let counterexamples = check::cells()
        .into_iter()
        .filter(|(v, s)| check::check(*v, *s).is_some_and(|c| c.broken.is_some()))
        .count();
    assert_eq!(cells.len(), counterexamples);
}

/// A worker stops at a scheduled buyer's gate between its order's commit
/// and its ack, for an order enqueued by the instance and for one the
/// sale's script wrote.
#[tokio::test]
async fn a_worker_stops_between_commit_and_ack() {
    helpers::within(Duration::from_secs(120), async {
        let orders_on = ["--chaos", "--orders", "on", "--redlock", "0", "--etcd", "0"];
        let stack = Stack::start_with(1, None, &orders_on).await;
        let redis_url = stack.redis_url.clone().expect("up started its Redis");
        for variant in ["lua-then-queue", "lua-stream"] {
            worker_stops_at_its_gate(&stack, &redis_url, variant).await;
        }
        stack.stop().await;
    })
    .await;
}

/// One scheduled sale of `variant`: its worker arrives at
/// `worker_committed` with the order written and its message not acked;
/// let go, it acks.
async fn worker_stops_at_its_gate(
    stack: &stocklock::harness::stack::Stack,
    redis_url: &str,
    variant: &str,
) {
    let sku = format!("worker-gate-{variant}");
    stack.client.reset(&sku, 5, 0).await.unwrap();
    let run = format!("worker-gate-{variant}");
    let mut scheduler = stocklock::gate::Scheduler::start(redis_url, &run)
        .await
        .unwrap();
    let path = format!("/deductStock/{variant}?sku={sku}&request_id=r-1&schedule={run}:A");
    let client = stack.client.clone();
    let request = tokio::spawn(async move { client.deduct(&path).await });
    // The buyer's answer and the worker's commit race each other: the
    // worker is held, the buyer let through to its answer.
    let mut gates = Vec::new();
    let mut held = None;
    while held.is_none() || gates.last().map(String::as_str) != Some("after_release") {
        let arrival = scheduler
            .next(Duration::from_secs(20))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{variant}: no arrival after {gates:?}"));
        if arrival.gate == "worker_committed" {
            held = Some(arrival);
            continue;
        }
        gates.push(arrival.gate.clone());
        scheduler.release(&arrival).await.unwrap();
    }
    let arrival = held.expect("the worker at its gate");
    let expected: &[&str] = match variant {
        "lua-then-queue" => &["before_acquire", "before_enqueue", "after_release"],
        _ => &["before_acquire", "after_release"],
    };
    assert_eq!(gates, expected, "{variant}: the buyer's gates");
    let answer = request.await.unwrap();
    assert!(answer.sold(), "{variant}: {answer:?}");
    let token = answer.order_token().expect("an order token");
    let order = stack.client.find_order(&sku, "r-1", token).await.unwrap();
    assert!(
        order.is_some(),
        "{variant}: the order is committed at the gate"
    );
    let store = stocklock::store::Store::open(redis_url).unwrap();
    let keys = stocklock::store::Keys::tagged_with(&sku);
    let pending = |store: stocklock::store::Store, orders: String| async move {
        let mut conn = store.conn().await.unwrap();
        let (count, ..): (i64, redis::Value, redis::Value, redis::Value) = redis::cmd("XPENDING")
            .arg(&orders)
            .arg(stocklock::orders::message::GROUP)
            .query_async(&mut conn)
            .await
            .unwrap();
        count
    };
    assert_eq!(
        pending(store.clone(), keys.orders.clone()).await,
        1,
        "{variant}: acked before its gate"
    );
    scheduler.release(&arrival).await.unwrap();
    let acked_by = std::time::Instant::now() + Duration::from_secs(10);
    while pending(store.clone(), keys.orders.clone()).await > 0 {
        assert!(
            std::time::Instant::now() < acked_by,
            "{variant}: never acked"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The command: a replay drawn beside the model, its JSON, and a clear
/// refusal of a cell with nothing to replay (before any stack starts).
#[tokio::test]
async fn the_command_draws_the_live_run_beside_the_model_and_refuses_a_safe_cell() {
    let dir = tempfile::tempdir().unwrap();
    let refused = tokio::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
        .args(["replay", "--variant", "lua", "--scenario", "race"])
        .output()
        .await
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("lua in race is safe: no counterexample to replay"),
        "{said}"
    );
    let _turn = helpers::stack_turn().await;
    let json = dir.path().join("replay.json");
    let drawn = dir.path().join("drawn");
    let ran = tokio::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
        .args([
            "replay",
            "--variant",
            "none",
            "--scenario",
            "race",
            "--json",
        ])
        .arg(&json)
        .arg("--timelines")
        .arg(&drawn)
        .output()
        .await
        .unwrap();
    let out = String::from_utf8_lossy(&ran.stdout);
    assert!(
        ran.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    assert!(
        out.contains("broken as the model says: they agree"),
        "{out}"
    );
    let replay: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(replay["agrees"], true, "{replay}");
    assert_eq!(
        replay["steps"].as_array().map(Vec::len),
        Some(8),
        "{replay}"
    );
    let live = std::fs::read_to_string(drawn.join("race-none-replay.html")).unwrap();
    assert!(live.contains("gate_hold"), "the live drawing shows no gate");
    assert!(drawn.join("race-none-model.html").is_file());
}
