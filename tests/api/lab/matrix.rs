//! The whole matrix, every cell played once in the suite, in two halves
//! run side by side (the Redis locks' scenarios, and the other stores'
//! and the orders'), which together are every scenario: each cell
//! observed as its variant claims, judged by the history checker and the
//! model too, the scenarios that tell variants apart telling them apart,
//! and (in `evidence.rs`) each cell's evidence showing its cause.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;
use stocklock::lab::Scenario;
use stocklock::variants::Variant;

use super::{find, lab};

/// Lanes each half is played in, each on a stack of its own.
const JOBS: &str = "2";

/// The scenarios of the Redis locks (one Redis, the lock's faults).
const LOCKS: [Scenario; 12] = [
    Scenario::OneInstance,
    Scenario::Race,
    Scenario::SlowBusiness,
    Scenario::CrashAfterAcquire,
    Scenario::PauseHolder,
    Scenario::KillInstance,
    Scenario::LockVanishesEarly,
    Scenario::LockVanishes,
    Scenario::RetryStorm,
    Scenario::ClockSkew,
    Scenario::RedisRestart,
    Scenario::RedisPause,
];

/// The rest: Redlock's nodes, the failovers, the orders, the database.
fn stores_and_orders() -> Vec<Scenario> {
    Scenario::ALL
        .into_iter()
        .filter(|s| !LOCKS.contains(s))
        .collect()
}

/// The two halves are the whole matrix: no scenario left out of both.
#[test]
fn the_two_halves_are_every_scenario() {
    let mut both: Vec<Scenario> = LOCKS.to_vec();
    both.extend(stores_and_orders());
    both.sort();
    let mut all = Scenario::ALL.to_vec();
    all.sort();
    assert_eq!(both, all);
    assert!(stores_and_orders().contains(&Scenario::Failover));
}

#[tokio::test]
async fn the_lab_proves_the_teaching_matrix_of_the_redis_locks() {
    let cells = play(&LOCKS).await;
    the_cells_are_the_claims(&LOCKS, &cells);
    super::evidence::each_cell_shows_its_cause(&LOCKS, &cells);
}

#[tokio::test]
async fn the_lab_proves_the_teaching_matrix_of_the_other_stores_and_the_orders() {
    let scenarios = stores_and_orders();
    let cells = play(&scenarios).await;
    the_cells_are_the_claims(&scenarios, &cells);
    // Redlock with a minority of its nodes down keeps selling; with a
    // majority down it is busy.
    let observed = |scenario, variant| find(&cells, scenario, variant).unwrap()["observed"].clone();
    assert_eq!(
        observed(Scenario::RedlockMinorityDown, Variant::Redlock),
        "keeps selling"
    );
    assert_eq!(
        observed(Scenario::RedlockMajorityDown, Variant::Redlock),
        "busy"
    );
    // WAIT turns the holder away when its lock did not replicate, but
    // covers only the lock: the write the failover rolls back is sold twice.
    assert_eq!(
        observed(Scenario::FailoverWaitEarly, Variant::Token),
        "safe"
    );
    assert_eq!(
        observed(Scenario::FailoverWait, Variant::Token),
        "oversells"
    );
    super::evidence::each_cell_shows_its_cause(&scenarios, &cells);
}

/// `stocklock lab SCENARIOS --jobs 2`: it passed; its cells.
async fn play(scenarios: &[Scenario]) -> Vec<Value> {
    let names: Vec<&str> = scenarios.iter().map(|s| s.name()).collect();
    let mut args = names.clone();
    args.extend(["--jobs", JOBS]);
    let (output, report) = lab(&args, &[], Duration::from_secs(600)).await;
    assert!(output.status.success(), "a cell failed");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("cells in"),
        "no summary line"
    );
    report["cells"].as_array().unwrap().clone()
}

/// Every cell of `scenarios` observed as claimed, judged alike by the
/// model and the history checker; the scenarios that tell variants apart
/// do; the pairs the articles are about, where they are among `scenarios`.
fn the_cells_are_the_claims(scenarios: &[Scenario], cells: &[Value]) {
    // One cell for every claim that applies, observed as claimed, with its evidence.
    let mut wanted = 0;
    for &scenario in scenarios {
        for variant in Variant::ALL {
            let claim = scenario.claim(variant);
            let cell = find(cells, scenario, variant);
            if !claim.applies() {
                assert!(cell.is_none(), "{scenario} / {variant} tests nothing");
                continue;
            }
            wanted += 1;
            let cell = cell.unwrap_or_else(|| panic!("no cell {scenario} / {variant}"));
            assert_eq!(cell["expected"], claim.text());
            assert_eq!(cell["observed"], claim.behaviour.name(), "{cell}");
            assert_eq!(cell["pass"], true, "{cell}");
            assert!(!cell["evidence"].as_str().unwrap().is_empty());
            // The history checker judged the cell too, from what its
            // clients were told, and agreed (a disagreement fails the cell).
            let history = cell["history"].as_str().unwrap_or_else(|| panic!("{cell}"));
            let judged = if claim.behaviour.name() == "oversells" {
                "unsafe"
            } else {
                "linearizable"
            };
            assert!(history.starts_with(judged), "{cell}");
            // The checker's verdict, where it has a model, says the same.
            if let Some(verdict) = stocklock::check::check(variant, scenario) {
                assert_eq!(cell["model"], verdict.summary(), "{cell}");
                assert!(verdict.agrees, "{cell}");
            }
        }
    }
    assert_eq!(cells.len(), wanted);

    // Discriminating power: wherever variants claim different behaviours
    // in one scenario, this one run observed each of them, decided by the
    // same judge.
    let mut discriminating = Vec::new();
    for &scenario in scenarios {
        let claimed: BTreeSet<&str> = Variant::ALL
            .iter()
            .map(|&v| scenario.claim(v))
            .filter(|c| c.applies())
            .map(|c| c.behaviour.name())
            .collect();
        let observed: BTreeSet<&str> = cells
            .iter()
            .filter(|c| c["scenario"] == scenario.name())
            .map(|c| c["observed"].as_str().unwrap())
            .collect();
        assert_eq!(observed, claimed, "{scenario}");
        if observed.len() > 1 {
            discriminating.push(scenario);
        }
    }
    let expected: Vec<Scenario> = [
        Scenario::OneInstance,
        Scenario::Race,
        Scenario::SlowBusiness,
        Scenario::CrashAfterAcquire,
        Scenario::PauseHolder,
        Scenario::KillInstance,
        Scenario::LockVanishesEarly,
        Scenario::LockVanishes,
        Scenario::ClockSkew,
        Scenario::RedlockRestartWithoutPersistence,
        Scenario::Failover,
        Scenario::CrashBeforeEnqueue,
    ]
    .into_iter()
    .filter(|s| scenarios.contains(s))
    .collect();
    assert_eq!(discriminating, expected);

    // The pairs the articles are about, by name: one judge, both verdicts.
    let observed = |scenario, variant| {
        find(cells, scenario, variant).unwrap()["observed"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let pairs = [
        (
            Scenario::OneInstance,
            Variant::None,
            "oversells",
            Variant::LocalMutex,
            "safe",
        ),
        (
            Scenario::Race,
            Variant::None,
            "oversells",
            Variant::Lua,
            "safe",
        ),
        (
            Scenario::SlowBusiness,
            Variant::Token,
            "oversells",
            Variant::Watchdog,
            "safe",
        ),
        (
            Scenario::CrashAfterAcquire,
            Variant::Setnx,
            "deadlock",
            Variant::Token,
            "frees",
        ),
        (
            Scenario::PauseHolder,
            Variant::Watchdog,
            "oversells",
            Variant::Fenced,
            "safe",
        ),
        (
            Scenario::LockVanishesEarly,
            Variant::Token,
            "oversells",
            Variant::Watchdog,
            "safe",
        ),
        // Deleted after the last renewal before the write: the watchdog
        // cannot notice; only the fence refuses the stale write.
        (
            Scenario::LockVanishes,
            Variant::Watchdog,
            "oversells",
            Variant::Fenced,
            "safe",
        ),
        (
            Scenario::ClockSkew,
            Variant::SetnxExpiry,
            "oversells",
            Variant::Token,
            "safe",
        ),
        (
            Scenario::RedlockRestartWithoutPersistence,
            Variant::Redlock,
            "oversells",
            Variant::Fenced,
            "safe",
        ),
        // Article 000's table: AP Redis loses the lock in a failover, CP
        // etcd and ZooKeeper keep it.
        (
            Scenario::Failover,
            Variant::Token,
            "oversells",
            Variant::Etcd,
            "safe",
        ),
        (
            Scenario::Failover,
            Variant::Fenced,
            "oversells",
            Variant::ZooKeeper,
            "safe",
        ),
    ];
    for (scenario, fails, failure, holds, success) in pairs {
        if !scenarios.contains(&scenario) {
            continue;
        }
        assert_eq!(observed(scenario, fails), failure, "{scenario} / {fails}");
        assert_eq!(observed(scenario, holds), success, "{scenario} / {holds}");
    }
    if scenarios.contains(&Scenario::Race) {
        assert_eq!(observed(Scenario::Race, Variant::LuaSharded), "safe");
    }
}
