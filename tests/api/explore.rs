//! `stocklock explore`: schedules of the real code chosen by PCT on a live
//! stack find the failures the checker finds, and find none where it
//! finds none.

use std::time::Duration;

use stocklock::lab::explore::{self, Strategy};
use stocklock::variants::{Scenario, Variant};

use crate::helpers::{self, Stack};

/// Counterexample cells exploration must find, within this many schedules
/// from seed 1.
const FOUND: [(Variant, Scenario); 3] = [
    (Variant::None, Scenario::Race),
    (Variant::Token, Scenario::SlowBusiness),
    (Variant::Setnx, Scenario::CrashAfterAcquire),
];
const FIND_WITHIN: usize = 40;

/// Safe cells across the protocols: a short exploration breaks nothing.
const SAFE: [(Variant, Scenario); 10] = [
    (Variant::LocalMutex, Scenario::OneInstance),
    (Variant::Setnx, Scenario::Race),
    (Variant::SetnxExpiry, Scenario::Race),
    (Variant::Token, Scenario::Race),
    (Variant::Watchdog, Scenario::Race),
    (Variant::Fenced, Scenario::LockVanishes),
    (Variant::Redlock, Scenario::Race),
    (Variant::Lua, Scenario::Race),
    (Variant::LuaBatch, Scenario::Race),
    (Variant::LuaSharded, Scenario::Race),
];
const SAFE_SCHEDULES: usize = 6;

#[tokio::test]
async fn exploration_finds_what_the_checker_finds_and_nothing_where_it_finds_nothing() {
    helpers::within(Duration::from_secs(600), async {
        let stack = Stack::start_with(3, None, &["--chaos"]).await;
        let redis_url = stack.redis_url.clone().expect("up started its Redis");
        for (variant, scenario) in FOUND {
            let explored = explore::explore(
                &stack,
                &redis_url,
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
            // Its seed finds it again.
            let again = explore::one(
                &stack,
                &redis_url,
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
        for (variant, scenario) in SAFE {
            let explored = explore::explore(
                &stack,
                &redis_url,
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
        }
        stack.stop().await;
    })
    .await;
}
