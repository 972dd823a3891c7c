//! The explorer's matrix: schedules of the real code chosen by PCT on a
//! live stack find the failures the checker finds, and find none where it
//! finds none. Four tests, each on a stack of its own with only the stores
//! its cells need, so they run beside each other.

use std::time::Duration;

use stocklock::explore::{self, Strategy};
use stocklock::variants::{Scenario, Variant};

use crate::helpers::{self, Stack};

/// Counterexample cells exploration must find, within this many schedules
/// from seed 1.
const FOUND: [(Variant, Scenario); 9] = [
    (Variant::None, Scenario::Race),
    (Variant::Token, Scenario::SlowBusiness),
    (Variant::Setnx, Scenario::CrashAfterAcquire),
    (Variant::SetnxExpiry, Scenario::SlowBusiness),
    (Variant::Token, Scenario::LockVanishesEarly),
    (Variant::Watchdog, Scenario::LockVanishes),
    (Variant::LuaThenQueue, Scenario::CrashBeforeEnqueue),
    (Variant::Token, Scenario::PauseHolder),
    (Variant::SetnxExpiry, Scenario::ClockSkew),
];
const FIND_WITHIN: usize = 40;

/// Safe cells of the locks on Redis, across their faults: a short
/// exploration breaks nothing (a crashed holder's lease running out frees
/// the lock; an early deletion is noticed by the watchdog; a frozen
/// holder's late write meets the fence; Redlock sells nothing while two of
/// its three nodes are down, and no unit twice once they come back empty).
const SAFE_LOCKS: [(Variant, Scenario); 14] = [
    (Variant::LocalMutex, Scenario::OneInstance),
    (Variant::Setnx, Scenario::Race),
    (Variant::SetnxExpiry, Scenario::Race),
    (Variant::Token, Scenario::Race),
    (Variant::Watchdog, Scenario::Race),
    (Variant::Fenced, Scenario::LockVanishes),
    (Variant::Redlock, Scenario::Race),
    (Variant::Redlock, Scenario::RedlockMajorityDown),
    (Variant::Token, Scenario::CrashAfterAcquire),
    (Variant::SetnxExpiry, Scenario::CrashAfterAcquire),
    (Variant::Watchdog, Scenario::KillInstance),
    (Variant::Watchdog, Scenario::LockVanishesEarly),
    (Variant::Fenced, Scenario::PauseHolder),
    (Variant::Watchdog, Scenario::SlowBusiness),
];

/// Safe cells of the scripts: a restart's new epoch refuses the old read;
/// a sale's order written in its script survives a crash after it.
const SAFE_SCRIPTS: [(Variant, Scenario); 6] = [
    (Variant::Lua, Scenario::Race),
    (Variant::LuaBatch, Scenario::Race),
    (Variant::LuaSharded, Scenario::Race),
    (Variant::Lua, Scenario::RedisRestart),
    (Variant::LuaThenQueue, Scenario::Race),
    (Variant::LuaStream, Scenario::CrashBeforeEnqueue),
];

/// Safe cells of the consensus stores: etcd's and ZooKeeper's leases and
/// sessions ended by the explorer free their locks, and a frozen holder's
/// write meets their fence.
const SAFE_CONSENSUS: [(Variant, Scenario); 6] = [
    (Variant::Etcd, Scenario::Race),
    (Variant::ZooKeeper, Scenario::RetryStorm),
    (Variant::Etcd, Scenario::PauseHolder),
    (Variant::Etcd, Scenario::KillInstance),
    (Variant::ZooKeeper, Scenario::CrashAfterAcquire),
    (Variant::ZooKeeper, Scenario::SlowBusiness),
];
const SAFE_SCHEDULES: usize = 50;

/// Redlock on three nodes, as the model has.
const REDLOCK: [&str; 3] = ["--chaos", "--redlock", "3"];
/// The order pipeline on: the order variants' schedules are reconciled.
const ORDERS: [&str; 3] = ["--chaos", "--orders", "on"];
/// An etcd member and a ZooKeeper server.
const CONSENSUS: [&str; 5] = ["--chaos", "--etcd", "1", "--zookeeper", "1"];

#[tokio::test]
async fn exploration_finds_what_the_checker_finds() {
    helpers::within(Duration::from_secs(600), async {
        let args = ["--chaos", "--orders", "on", "--redlock", "3"];
        let stack = Stack::start_with(3, None, &args).await;
        let redis_url = stack.redis_url.clone().expect("up started its Redis");
        let redises = explore::Redises::one(&redis_url);
        for (variant, scenario) in FOUND {
            let explored = explore::explore(
                &stack,
                &redises,
                variant,
                scenario,
                Strategy::Pct,
                FIND_WITHIN,
                1,
            )
            .await
            .unwrap_or_else(|err| panic!("{variant} in {scenario}: {err:#}"));
            let found = explored.found.unwrap_or_else(|| {
                panic!("{variant} in {scenario}: nothing in {FIND_WITHIN} schedules")
            });
            eprintln!(
                "{variant} in {scenario}: found in {} schedules: {}",
                explored.schedules, found.ledger
            );
            assert!(
                found.disagreement.is_none() && explored.disagreed.is_none(),
                "{variant} in {scenario}: the judges disagree: {found:#?}"
            );
            // Its seed finds it again.
            let again = explore::one(
                &stack,
                &redises,
                variant,
                scenario,
                Strategy::Pct,
                found.seed,
            )
            .await
            .unwrap();
            assert!(
                again.violation,
                "{variant} in {scenario}: seed {} did not repeat: {}",
                found.seed, again.ledger
            );
        }
        // Redlock's buyers ask its nodes at gates of their own (`vote:K`):
        // each schedule lets every vote go and ends with every buyer
        // answered (the stock sold out), not with buyers dropped halfway.
        for seed in 1..=5 {
            let schedule = explore::one(
                &stack,
                &redises,
                Variant::Redlock,
                Scenario::Race,
                Strategy::Pct,
                seed,
            )
            .await
            .unwrap();
            let votes = schedule
                .steps
                .iter()
                .filter(|step| matches!(step, explore::Choice::Release { gate, .. } if gate.starts_with("vote:")))
                .count();
            assert!(votes >= 6, "seed {seed}: {:?}", schedule.steps);
            assert!(
                schedule.ledger.contains("sold 2 of 2"),
                "seed {seed}: {}",
                schedule.ledger
            );
        }
        stack.stop().await;
    })
    .await;
}

#[tokio::test]
async fn exploration_finds_nothing_where_the_checker_finds_nothing_in_the_locks_on_redis() {
    safe(&REDLOCK, &SAFE_LOCKS).await;
}

#[tokio::test]
async fn exploration_finds_nothing_where_the_checker_finds_nothing_in_the_scripts() {
    safe(&ORDERS, &SAFE_SCRIPTS).await;
}

#[tokio::test]
async fn exploration_finds_nothing_where_the_checker_finds_nothing_in_etcd_and_zookeeper() {
    safe(&CONSENSUS, &SAFE_CONSENSUS).await;
}

/// [`SAFE_SCHEDULES`] schedules of each cell on a stack started with
/// `args`: none breaks a property, the judges agree on every one, and
/// where the scenario has faults they struck.
async fn safe(args: &[&str], cells: &[(Variant, Scenario)]) {
    helpers::within(Duration::from_secs(600), async {
        let stack = Stack::start_with(3, None, args).await;
        let redis_url = stack.redis_url.clone().expect("up started its Redis");
        let redises = explore::Redises::one(&redis_url);
        for &(variant, scenario) in cells {
            let explored = explore::explore(
                &stack,
                &redises,
                variant,
                scenario,
                Strategy::Pct,
                SAFE_SCHEDULES,
                1,
            )
            .await
            .unwrap_or_else(|err| panic!("{variant} in {scenario}: {err:#}"));
            assert_eq!(
                explored.schedules, SAFE_SCHEDULES,
                "{variant} in {scenario}"
            );
            assert!(
                explored.found.is_none(),
                "{variant} in {scenario} broke: {:#?}",
                explored.found
            );
            // The history checker agreed on every schedule: crashed buyers
            // recorded as unanswered, a restart's re-stock as units back.
            assert!(
                explored.disagreed.is_none(),
                "{variant} in {scenario}: the judges disagree: {:#?}",
                explored.disagreed
            );
            // Not hollow: where the scenario has faults, they struck (in
            // retry-storm, the request id's claim running out).
            let faults = !matches!(scenario, Scenario::OneInstance | Scenario::Race);
            assert!(
                !faults || !explored.struck.is_empty(),
                "{variant} in {scenario}: no fault struck in {SAFE_SCHEDULES} schedules"
            );
        }
        stack.stop().await;
    })
    .await;
}
