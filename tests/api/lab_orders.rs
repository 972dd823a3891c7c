//! The lab's order scenarios, one test each, run by `stocklock lab` for
//! both order variants (`lua-then-queue`, `lua-stream`), each cell on a
//! stack of its own with PostgreSQL. Every cell must observe what its
//! variant claims, with the evidence that the fault landed; the claims are
//! checked too, so a claim changed to fit a broken variant fails here.
//!
//! Without PostgreSQL the tests say SKIPPED (and fail under CI=true).

use std::time::Duration;

use serde_json::Value;
use stocklock::lab::Scenario;
use stocklock::variants::{Behaviour, Variant};

use crate::lab::{find, lab};

/// The two cells of `scenario`, once each observed its claim, which must
/// be `lua_then_queue` and `lua_stream`; `None` (SKIPPED) without PostgreSQL.
async fn cells(
    scenario: Scenario,
    lua_then_queue: Behaviour,
    lua_stream: Behaviour,
) -> Option<(Value, Value)> {
    if !stocklock::up::postgres::installed() {
        crate::helpers::missing_tool("PostgreSQL is not installed (scripts/deps.sh postgresql)");
        return None;
    }
    assert_eq!(
        scenario.claim(Variant::LuaThenQueue).behaviour,
        lua_then_queue
    );
    assert_eq!(scenario.claim(Variant::LuaStream).behaviour, lua_stream);
    let (output, report) = lab(
        &[scenario.name(), "--variant", "lua-then-queue,lua-stream"],
        &[],
        Duration::from_secs(240),
    )
    .await;
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{cells:?}");
    for cell in cells {
        assert_eq!(cell["pass"], true, "{cell}");
    }
    assert!(output.status.success(), "a cell failed");
    let cell = |variant, behaviour: Behaviour| {
        let cell = find(cells, scenario, variant).unwrap().clone();
        assert_eq!(cell["observed"], behaviour.name(), "{cell}");
        cell
    };
    Some((
        cell(Variant::LuaThenQueue, lua_then_queue),
        cell(Variant::LuaStream, lua_stream),
    ))
}

fn evidence(cell: &Value) -> &str {
    cell["evidence"].as_str().unwrap()
}

/// The crash between the sale and its XADD loses exactly the unit it
/// struck (the third sold of 10: unit 8); inside one script, nothing.
#[tokio::test]
async fn crash_before_enqueue_loses_the_struck_unit_unless_the_script_enqueues() {
    let Some((queue, stream)) = cells(
        Scenario::CrashBeforeEnqueue,
        Behaviour::LosesUnits,
        Behaviour::Safe,
    )
    .await
    else {
        return;
    };
    for cell in [&queue, &stream] {
        assert!(
            evidence(cell)
                .contains("crashed after the script of the armed sale (unit 8), back as pid"),
            "{cell}"
        );
    }
    assert!(
        evidence(&queue).contains("books: 1 lost (sold, no order) (units 8); sold 5, orders 4"),
        "{queue}"
    );
    assert!(
        evidence(&stream).contains("books: clean: 5 sold, 5 orders"),
        "{stream}"
    );
}

/// Both order variants' cells of `scenario` observed `safe`, each with
/// every piece of `evidence` (SKIPPED without PostgreSQL).
async fn both_safe(scenario: Scenario, shown: &[&str]) {
    let Some((queue, stream)) = cells(scenario, Behaviour::Safe, Behaviour::Safe).await else {
        return;
    };
    for cell in [&queue, &stream] {
        let text = evidence(cell);
        for piece in shown {
            assert!(text.contains(piece), "{piece:?} not in {text}");
        }
    }
}

/// A worker that dies between its commit and its ack: its messages are
/// delivered again and inserted once; nothing unacked is left.
#[tokio::test]
async fn a_worker_crash_before_its_ack_loses_and_duplicates_no_order() {
    both_safe(
        Scenario::WorkerCrashBeforeAck,
        &[
            "before its XACK: instance",
            "books: clean: 4 sold, 4 orders",
        ],
    )
    .await;
}

/// PostgreSQL down: buyers still get 200, the orders wait in the stream
/// and are all written once it is back.
#[tokio::test]
async fn orders_wait_for_a_restarted_postgres_and_none_is_lost() {
    both_safe(
        Scenario::PostgresRestart,
        &[
            "(answers 200 sold, 200 sold, 200 sold), the orders' view answered 503 meanwhile",
            "books: clean: 5 sold, 5 orders",
        ],
    )
    .await;
}

/// Unpaid reservations give their unit back once (a second pass gives
/// nothing), paid ones never.
#[tokio::test]
async fn expired_reservations_return_their_unit_once_and_paid_ones_never() {
    both_safe(
        Scenario::ReservationExpiry,
        &[
            "the second expired 0, returned 0 (again 0, stale 0)",
            "orders 6 (3 paid, 0 pending, 3 expired), returned 3, stock 7 of 10",
        ],
    )
    .await;
}

/// Redis comes back empty with three orders in flight: they are gone with
/// it (the buyers were told sold), and reconcile says so: the two orders
/// written before are orphaned (`LEDGER_LOST`), the three sales after the
/// reset each have their order.
#[tokio::test]
async fn a_redis_that_lost_its_data_is_reported_by_reconcile_never_clean() {
    let Some((queue, stream)) = cells(
        Scenario::RedisDataLoss,
        Behaviour::LosesUnits,
        Behaviour::LosesUnits,
    )
    .await
    else {
        return;
    };
    for cell in [&queue, &stream] {
        let text = evidence(cell);
        for piece in [
            "3 sales (200 sold, 200 sold, 200 sold) in flight when Redis restarted empty",
            "books: LEDGER_LOST: orphaned epochs: 2 orders (of 1 epochs the ledger never opened: ",
            "this epoch: clean: 3 sold, 3 orders",
            "5 orders in PostgreSQL for 8 sales answered sold (2 written before the loss, 3 in flight, 3 after the reset)",
        ] {
            assert!(text.contains(piece), "{piece:?} not in {text}");
        }
    }
}
