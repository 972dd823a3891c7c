//! `stocklock replay`: every counterexample of the checker that the gates
//! can stand for, driven step for step through the real code on a live
//! stack, breaks live what it breaks in the model.

use std::time::Duration;

use stocklock::check;
use stocklock::lab::replay;

use crate::helpers::{self, Stack};

/// The counterexample cells replays cannot play yet, and why (the docs
/// name them too: docs/schedules.md).
const NOT_YET: [(&str, &str, &str); 4] = [
    ("token", "failover", "the gates"),
    ("token", "failover-wait", "the gates"),
    ("watchdog", "failover", "the gates"),
    ("fenced", "failover", "the gates"),
];

/// The cell whose replay kills and restarts Redlock nodes: on a stack of
/// its own (`a_redlock_node_...`).
const NODE_CELL: (&str, &str) = ("redlock", "redlock-restart-without-persistence");

/// The counterexample cells of the order pipeline: replayed on a stack
/// with the orders on (`order_cells_...`).
const ORDER_CELLS: [(&str, &str); 3] = [
    ("lua-then-queue", "crash-before-enqueue"),
    ("lua-then-queue", "redis-data-loss"),
    ("lua-stream", "redis-data-loss"),
];

#[tokio::test]
async fn every_counterexample_the_gates_reach_breaks_live_as_in_the_model() {
    helpers::within(Duration::from_secs(600), async {
        // Three Redlock nodes, as the model has.
        let stack = Stack::start_with(3, None, &["--chaos", "--redlock", "3"]).await;
        let redis_url = stack.redis_url.clone().expect("up started its Redis");
        let mut not_yet = Vec::new();
        let mut orders = Vec::new();
        let mut kills_nodes = Vec::new();
        let mut played = 0;
        for (variant, scenario) in check::cells() {
            let verdict = check::check(variant, scenario).expect("a modelled cell");
            if verdict.broken.is_none() {
                continue;
            }
            if let Some(why) = replay::unsupported(&verdict) {
                not_yet.push((verdict.variant, verdict.scenario, why));
                continue;
            }
            if replay::needs_orders(&verdict) {
                orders.push((verdict.variant, verdict.scenario));
                continue;
            }
            if replay::kills_nodes(&verdict) {
                kills_nodes.push((verdict.variant, verdict.scenario));
                continue;
            }
            let replay = replay::replay_on(&stack, &redis_url, &verdict, 300)
                .await
                .unwrap_or_else(|err| panic!("{variant} in {scenario}: {err:#}"));
            assert!(
                replay.agrees,
                "{variant} in {scenario}: the model breaks \"{}\", live: {}\n{:#?}",
                replay.property, replay.live, replay.steps
            );
            played += 1;
        }
        eprintln!(
            "replayed {played} counterexamples live; {} not yet",
            not_yet.len()
        );
        let named: Vec<(&str, &str)> = NOT_YET.iter().map(|(v, s, _)| (*v, *s)).collect();
        let found: Vec<(&str, &str)> = not_yet.iter().map(|(v, s, _)| (*v, *s)).collect();
        assert_eq!(found, named, "the cells replays cannot play: {not_yet:#?}");
        for ((_, _, why), (variant, scenario, named)) in not_yet.iter().zip(NOT_YET) {
            assert!(why.contains(named), "{variant} in {scenario}: {why}");
        }
        assert_eq!(played, 22, "replayed");
        assert_eq!(orders, ORDER_CELLS, "the order cells");
        assert_eq!(kills_nodes, [NODE_CELL], "the cells that kill nodes");
        stack.stop().await;
    })
    .await;
}

/// Redlock with a node down from the start and one restarting empty
/// under a frozen buyer: the live nodes are killed and started again where
/// the model's are, and the unit sells twice as in the model.
#[tokio::test]
async fn a_redlock_node_restarting_empty_breaks_live_as_in_the_model() {
    helpers::within(Duration::from_secs(300), async {
        let stack = Stack::start_with(3, None, &["--chaos", "--redlock", "3"]).await;
        let redis_url = stack.redis_url.clone().expect("up started its Redis");
        let (variant, scenario) = NODE_CELL;
        let verdict = check::check(variant.parse().unwrap(), scenario.parse().unwrap())
            .expect("a modelled cell");
        let replay = replay::replay_on(&stack, &redis_url, &verdict, 300)
            .await
            .unwrap_or_else(|err| panic!("{variant} in {scenario}: {err:#}"));
        assert!(
            replay.agrees,
            "{variant} in {scenario}: the model breaks \"{}\", live: {}\n{:#?}",
            replay.property, replay.live, replay.steps
        );
        let restarts = replay
            .steps
            .iter()
            .filter(|s| s.live.contains("starts again, empty"))
            .count();
        assert_eq!(restarts, 2, "{:#?}", replay.steps);
        stack.stop().await;
    })
    .await;
}

/// The order pipeline's counterexamples break live as in the model (a
/// unit sold with no order), on a stack with the orders on; and a worker
/// stops at a scheduled buyer's gate between its order's commit and its
/// ack, for an order enqueued by the instance and for one the sale's
/// script wrote.
#[tokio::test]
async fn order_cells_replay_live_and_a_worker_stops_between_commit_and_ack() {
    helpers::within(Duration::from_secs(300), async {
        let orders_on = ["--chaos", "--orders", "on", "--redlock", "0", "--etcd", "0"];
        let stack = Stack::start_with(3, None, &orders_on).await;
        let redis_url = stack.redis_url.clone().expect("up started its Redis");
        for (variant, scenario) in ORDER_CELLS {
            let verdict = check::check(variant.parse().unwrap(), scenario.parse().unwrap())
                .expect("a modelled cell");
            assert_eq!(
                replay::unsupported(&verdict),
                None,
                "{variant} in {scenario}"
            );
            let replay = replay::replay_on(&stack, &redis_url, &verdict, 300)
                .await
                .unwrap_or_else(|err| panic!("{variant} in {scenario}: {err:#}"));
            assert!(
                replay.agrees,
                "{variant} in {scenario}: the model breaks \"{}\", live: {}\n{:#?}",
                replay.property, replay.live, replay.steps
            );
        }
        for variant in ["lua-then-queue", "lua-stream"] {
            worker_stops_at_its_gate(&stack, &redis_url, variant).await;
        }
        stack.stop().await;
        // The command starts the stack an order cell needs by itself.
        let ran = tokio::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
            .args([
                "replay",
                "--variant",
                "lua-stream",
                "--scenario",
                "redis-data-loss",
            ])
            .kill_on_drop(true)
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
            out.contains("sales answered sold with no order: A's"),
            "{out}"
        );
    })
    .await;
}

/// One scheduled sale of `variant`: its worker arrives at
/// `worker_committed` with the order written and its message not acked;
/// let go, it acks.
async fn worker_stops_at_its_gate(
    stack: &stocklock::lab::stack::Stack,
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
