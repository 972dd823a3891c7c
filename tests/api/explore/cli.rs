//! `stocklock explore` from the command line, each on a stack of its own:
//! the live mutants found and the code without them passing the same
//! seeds, the database's locks with their holders crashing, a buyer told
//! sold out with stock left, calls cut off by a paused Redis.

use std::time::Duration;

use stocklock::variants::{Scenario, Variant};

use super::{explore_cli, explore_said};
use crate::helpers;

/// The live mutants (a debug build's switch; the test binary's `stocklock`
/// is a debug build), each with the cell where exploration meets what the
/// mechanism prevents: the fence a late write (`fenced`'s, and etcd's
/// revision after the explorer ended a working holder's lease); the claim a retried id; the
/// watchdog's check a deletion its renewal noticed; `pg-batch`'s row lock
/// two batches reading the same stock; the owner's release a
/// lock a newcomer took after Redis came back empty. That last one needs
/// three buyers in one order across the restart (the old holder's `DEL`
/// after the newcomer took the lock, a third buyer in before the newcomer
/// writes): more ordering constraints than PCT's two change points give,
/// so it is explored at random.
const MUTANTS: [(&str, Variant, Scenario, &str); 6] = [
    ("no-fence", Variant::Fenced, Scenario::LockVanishes, "pct"),
    ("no-fence", Variant::Etcd, Scenario::SlowBusiness, "pct"),
    ("no-claim", Variant::Token, Scenario::RetryStorm, "pct"),
    (
        "no-lost-check",
        Variant::Watchdog,
        Scenario::LockVanishesEarly,
        "pct",
    ),
    (
        "plain-del",
        Variant::Token,
        Scenario::RedisRestart,
        "random",
    ),
    // pg-batch's row lock: two batches read the same stock, both write it.
    ("no-row-lock", Variant::PgBatch, Scenario::Race, "pct"),
];
const MUTANT_WITHIN: usize = 300;

/// The database's locks explored from the command line: the explorer's
/// stack has PostgreSQL (without it every buyer would be told the store
/// is missing, and nothing explored), crashes strike (a dead holder's
/// transaction is ended, its lock freed, as a dead process's would be),
/// a frozen holder's session is ended by the database itself (`Expire`:
/// its idle timeout, the lease, waited out), and no schedule breaks a
/// property. Without the idle timeout (the live mutant `no-idle-timeout`)
/// the frozen holder's session is never ended, and the explorer says so.
#[tokio::test]
async fn the_database_locks_are_explored_with_their_holders_crashing_and_frozen() {
    helpers::within(Duration::from_secs(300), async {
        if !stocklock::up::postgres::installed() {
            helpers::missing_tool("PostgreSQL is not installed (scripts/deps.sh postgresql)");
            return;
        }
        for (cell, fault) in [
            (
                (Variant::PgForUpdate, Scenario::CrashAfterAcquire, "pct"),
                "Crash",
            ),
            (
                (Variant::PgAdvisory, Scenario::KillInstance, "pct"),
                "Crash",
            ),
            // One database lock here, the other with the mutant below:
            // the explorer's fault is the same for both (the lab plays both).
            (
                (Variant::PgAdvisory, Scenario::PauseHolder, "random"),
                "Expire",
            ),
        ] {
            let (code, report) = explore_cli(cell, 10, None).await;
            assert_eq!(code, 0, "{} in {}: {report}", cell.0, cell.1);
            assert_eq!(report["schedules"], 10, "{report}");
            assert!(report["found"].is_null(), "{report}");
            let struck = report["struck"][fault].as_u64().unwrap_or(0);
            assert!(
                struck > 0,
                "{} in {}: no {fault} struck: {report}",
                cell.0,
                cell.1
            );
        }
        let cell = (Variant::PgForUpdate, Scenario::PauseHolder, "random");
        let (code, said) = explore_said(cell, 10, Some("no-idle-timeout")).await;
        assert_ne!(code, 0, "{said}");
        assert!(
            said.contains("the database never ended a silent holder's session"),
            "{said}"
        );
    })
    .await;
}

/// Each live mutant is found by exploration within [`MUTANT_WITHIN`]
/// schedules, and the code as it is passes the same seeds.
#[tokio::test]
async fn each_live_mutant_is_found_and_the_code_without_it_passes_the_same_schedules() {
    helpers::within(Duration::from_secs(600), async {
        for (mutant, variant, scenario, strategy) in MUTANTS {
            let cell = (variant, scenario, strategy);
            let (code, mutated) = explore_cli(cell, MUTANT_WITHIN, Some(mutant)).await;
            let found = &mutated["found"];
            assert!(
                code == 2 && !found.is_null(),
                "{mutant} ({variant} in {scenario}): not found in {MUTANT_WITHIN} schedules (exit {code}): {mutated}"
            );
            // The history checker, knowing nothing of the mechanism taken
            // out, convicts the breaking schedule from its answers alone.
            assert!(
                found["history"].as_str().unwrap().starts_with("unsafe")
                    && found["disagreement"].is_null(),
                "{mutant} ({variant} in {scenario}): {found}"
            );
            let until = mutated["until_found"].as_u64().unwrap() as usize;
            eprintln!("{mutant} ({variant} in {scenario}): found in {until} schedules: {}", found["ledger"]);
            let (code, clean) = explore_cli(cell, until, None).await;
            assert!(
                code == 0 && clean["found"].is_null() && clean["schedules"] == until,
                "{variant} in {scenario} without {mutant} broke within seeds 1..={until}: {clean}"
            );
        }
    })
    .await;
}

/// `redis-then-pg` in `kill-instance` claims it keeps selling: a buyer
/// killed between Redis and the database leaves Redis a unit short, and
/// the database answers whom Redis turns away. The explorer's ledger judge
/// looks at safety only; the history checker sees what the buyers were
/// told, so with the live mutant `redis-says-sold-out` (Redis's sold-out
/// answered by itself) a schedule where a buyer is told sold out with a
/// unit left in the database fails the exploration, and the code as it is
/// passes the same seeds with its crashes struck.
#[tokio::test]
async fn a_buyer_told_sold_out_with_stock_left_fails_a_cell_that_claims_it_keeps_selling() {
    helpers::within(Duration::from_secs(300), async {
        if !stocklock::up::postgres::installed() {
            helpers::missing_tool("PostgreSQL is not installed (scripts/deps.sh postgresql)");
            return;
        }
        let cell = (Variant::RedisThenPg, Scenario::KillInstance, "pct");
        let (code, mutated) = explore_cli(cell, 30, Some("redis-says-sold-out")).await;
        let disagreed = &mutated["disagreed"];
        assert!(
            code == 2
                && disagreed["disagreement"].as_str().is_some_and(
                    |d| d.starts_with("a buyer was told sold out while stock remained")
                ),
            "exit {code}: {mutated}"
        );
        assert!(
            disagreed["history"]
                .as_str()
                .unwrap()
                .starts_with("not_linearizable"),
            "{mutated}"
        );
        let until = mutated["schedules"].as_u64().unwrap() as usize;
        let (code, clean) = explore_cli(cell, until.max(10), None).await;
        assert!(
            code == 0 && clean["disagreed"].is_null() && clean["found"].is_null(),
            "exit {code}: {clean}"
        );
        assert!(
            clean["struck"]["Crash"].as_u64().unwrap_or(0) > 0,
            "{clean}"
        );
    })
    .await;
}

/// `redis-pause`, on a stack of the explorer's own whose gates meet in a
/// Redis apart: a buyer's call goes into a paused Redis and is answered
/// `unknown`, the buyer asks again with its id, and every sale in the
/// ledger is a buyer's answered `sold` (a batch's buyers too).
#[tokio::test]
async fn calls_cut_off_by_a_paused_redis_resolve_on_retry_in_every_schedule() {
    helpers::within(Duration::from_secs(300), async {
        const SCHEDULES: usize = 10;
        let cell = (Variant::LuaBatch, Scenario::RedisPause, "pct");
        let (code, explored) = explore_cli(cell, SCHEDULES, None).await;
        assert!(
            code == 0 && explored["found"].is_null() && explored["schedules"] == SCHEDULES,
            "{explored}"
        );
        let cut = explored["struck"]["Cutoff"].as_u64().unwrap_or(0);
        assert!(
            cut >= 1,
            "no call was cut off in {SCHEDULES} schedules: {explored}"
        );
    })
    .await;
}
