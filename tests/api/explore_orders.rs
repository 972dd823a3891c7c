//! `stocklock explore` of the order pipeline's own faults: the instances'
//! workers moved a turn at a time, on a PostgreSQL the test stops and
//! starts, find no lost order where the checker finds none, and find the
//! one it finds.

use std::sync::Arc;
use std::time::Duration;

use stocklock::explore::{self, Choice, Strategy};
use stocklock::up::postgres::PostgresServer;
use stocklock::variants::{Scenario, Variant};

use crate::helpers::{self, Stack};

/// Safe cells, each with the fault that must strike in some schedule: a
/// worker's death between its commit and its ack (another claims its
/// message, and the insert of a sale already ordered changes nothing);
/// PostgreSQL stopped and started (the messages wait on the stream); a
/// reservation run out (its unit given back once) or paid.
const SAFE: [(Variant, Scenario, &str); 4] = [
    (
        Variant::LuaStream,
        Scenario::WorkerCrashBeforeAck,
        "WorkerCrash",
    ),
    (
        Variant::LuaThenQueue,
        Scenario::WorkerCrashBeforeAck,
        "WorkerCrash",
    ),
    (
        Variant::LuaThenQueue,
        Scenario::PostgresRestart,
        "PostgresStop",
    ),
    (Variant::LuaStream, Scenario::ReservationExpiry, "Overdue"),
];
const SAFE_SCHEDULES: usize = 12;
/// Redis losing a sale's message before a worker read it: the checker's
/// counterexample, found within this many schedules.
const FIND_WITHIN: usize = 40;

#[tokio::test]
async fn the_order_pipelines_faults_are_explored_turn_by_turn() {
    helpers::within(Duration::from_secs(420), async {
        let postgres = PostgresServer::start(None).await.expect("PostgreSQL");
        let url = postgres.url();
        // A dead worker's messages are claimed at the next turn of another.
        let args = [
            "--chaos",
            "--orders",
            "on",
            "--postgres-url",
            &url,
            "--claim-idle",
            "1ms",
        ];
        let stack = Stack::start_with(3, None, &args).await;
        let redis_url = stack.redis_url.clone().expect("up started its Redis");
        let redises = explore::Redises {
            postgres: Some(Arc::new(tokio::sync::Mutex::new(postgres))),
            ..explore::Redises::one(&redis_url)
        };
        // Up to `schedules` of a cell from seed 1.
        let explore_cell = |variant: Variant, scenario: Scenario, schedules: usize| {
            let redises = &redises;
            let stack = &stack;
            async move {
                explore::explore(stack, redises, variant, scenario, Strategy::Pct, schedules, 1)
                    .await
                    .unwrap_or_else(|err| panic!("{variant} in {scenario}: {err:#}"))
            }
        };
        for (variant, scenario, fault) in SAFE {
            let explored = explore_cell(variant, scenario, SAFE_SCHEDULES).await;
            if let Some(found) = &explored.found {
                panic!(
                    "{variant} in {scenario}: the checker finds nothing, schedule {} (seed {}) broke: {}; steps {:?}",
                    explored.until_found.unwrap_or_default(),
                    found.seed,
                    found.ledger,
                    found.steps
                );
            }
            let struck = explored.struck.get(fault).copied().unwrap_or(0);
            assert!(
                struck > 0,
                "{variant} in {scenario}: {fault} struck in none of {SAFE_SCHEDULES} schedules: {:?}",
                explored.struck
            );
            eprintln!(
                "{variant} in {scenario}: {SAFE_SCHEDULES} schedules, {fault} in {struck}, nothing broke"
            );
        }
        // A worker let go of its ack while PostgreSQL is down goes on to
        // its batch's next insert, fails, and waits for PostgreSQL (the
        // model's worker, whose insert fails, lets its message stay
        // pending): it reaches no gate until PostgreSQL is back. Seed
        // 64 of lua-stream acks there (it stalled the explorer once).
        let (variant, scenario) = (Variant::LuaStream, Scenario::PostgresRestart);
        let schedule = explore::one(&stack, &redises, variant, scenario, Strategy::Pct, 64)
            .await
            .unwrap_or_else(|err| panic!("{variant} in {scenario}, seed 64: {err:#}"));
        let at = |wanted: fn(&Choice) -> bool| schedule.steps.iter().position(wanted);
        let (stop, start) = (
            at(|c| matches!(c, Choice::PostgresStop)),
            at(|c| matches!(c, Choice::PostgresStart)),
        );
        let acked_while_down = schedule.steps.iter().enumerate().any(|(i, c)| {
            matches!(c, Choice::Ack { .. })
                && stop.is_some_and(|s| s < i)
                && start.is_none_or(|s| i < s)
        });
        assert!(
            acked_while_down && !schedule.violation,
            "{variant} in {scenario}, seed 64: an ack while PostgreSQL was down, and nothing broke: {:?}; {}",
            schedule.steps,
            schedule.ledger
        );
        let (variant, scenario) = (Variant::LuaThenQueue, Scenario::RedisDataLoss);
        let explored = explore_cell(variant, scenario, FIND_WITHIN).await;
        let found = explored.found.unwrap_or_else(|| {
            panic!("{variant} in {scenario}: no lost order in {FIND_WITHIN} schedules")
        });
        assert!(
            found.ledger.contains("buyers sold with no order: [\""),
            "{variant} in {scenario}: broke, but not by a lost order: {}",
            found.ledger
        );
        let again = explore::one(&stack, &redises, variant, scenario, Strategy::Pct, found.seed)
            .await
            .unwrap();
        assert!(
            again.violation && again.steps == found.steps,
            "{variant} in {scenario}: seed {} did not repeat: {:?} then {:?}",
            found.seed,
            found.steps,
            again.steps
        );
    })
    .await;
}
