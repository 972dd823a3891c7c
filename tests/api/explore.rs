//! `stocklock explore`: schedules of the real code chosen by PCT on a live
//! stack find the failures the checker finds, and find none where it
//! finds none.

use std::time::Duration;

use serde_json::Value;

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

/// Safe cells across the protocols and their faults: a short exploration
/// breaks nothing (a crashed holder's lease running out frees the lock;
/// an early deletion is noticed by the watchdog; a restart's new epoch
/// refuses the old read; a sale's order written in its script survives a
/// crash after it; a frozen holder's late write meets the fence; Redlock
/// sells nothing while two of its three nodes are down, and no unit twice
/// once they come back empty; etcd's and ZooKeeper's leases and sessions
/// ended by the explorer free their locks, and a frozen holder's write
/// meets their fence).
const SAFE: [(Variant, Scenario); 26] = [
    (Variant::LocalMutex, Scenario::OneInstance),
    (Variant::Setnx, Scenario::Race),
    (Variant::SetnxExpiry, Scenario::Race),
    (Variant::Token, Scenario::Race),
    (Variant::Watchdog, Scenario::Race),
    (Variant::Fenced, Scenario::LockVanishes),
    (Variant::Redlock, Scenario::Race),
    (Variant::Redlock, Scenario::RedlockMajorityDown),
    (Variant::Lua, Scenario::Race),
    (Variant::LuaBatch, Scenario::Race),
    (Variant::LuaSharded, Scenario::Race),
    (Variant::Token, Scenario::CrashAfterAcquire),
    (Variant::SetnxExpiry, Scenario::CrashAfterAcquire),
    (Variant::Watchdog, Scenario::KillInstance),
    (Variant::Watchdog, Scenario::LockVanishesEarly),
    (Variant::Lua, Scenario::RedisRestart),
    (Variant::LuaThenQueue, Scenario::Race),
    (Variant::LuaStream, Scenario::CrashBeforeEnqueue),
    (Variant::Etcd, Scenario::Race),
    (Variant::ZooKeeper, Scenario::RetryStorm),
    (Variant::Fenced, Scenario::PauseHolder),
    (Variant::Watchdog, Scenario::SlowBusiness),
    (Variant::Etcd, Scenario::PauseHolder),
    (Variant::Etcd, Scenario::KillInstance),
    (Variant::ZooKeeper, Scenario::CrashAfterAcquire),
    (Variant::ZooKeeper, Scenario::SlowBusiness),
];
const SAFE_SCHEDULES: usize = 50;

#[tokio::test]
async fn exploration_finds_what_the_checker_finds_and_nothing_where_it_finds_nothing() {
    helpers::within(Duration::from_secs(600), async {
        // The order pipeline on (the order variants' schedules are
        // reconciled), Redlock on three nodes, as the model has, and an
        // etcd member and a ZooKeeper server.
        let args = [
            "--chaos",
            "--orders",
            "on",
            "--redlock",
            "3",
            "--etcd",
            "1",
            "--zookeeper",
            "1",
        ];
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
        for (variant, scenario) in SAFE {
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

/// The live mutants (a debug build's switch; the test binary's `stocklock`
/// is a debug build), each with the cell where exploration meets what the
/// mechanism prevents: the fence a late write (`fenced`'s, and etcd's
/// revision after the explorer ended a working holder's lease); the claim a retried id; the
/// watchdog's check a deletion its renewal noticed; the owner's release a
/// lock a newcomer took after Redis came back empty. That last one needs
/// three buyers in one order across the restart (the old holder's `DEL`
/// after the newcomer took the lock, a third buyer in before the newcomer
/// writes): more ordering constraints than PCT's two change points give,
/// so it is explored at random.
const MUTANTS: [(&str, Variant, Scenario, &str); 5] = [
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
];
const MUTANT_WITHIN: usize = 300;

/// `stocklock explore` on a stack of its own; its exit code and JSON.
pub(crate) async fn explore_cli(
    cell: (Variant, Scenario, &str),
    schedules: usize,
    mutant: Option<&str>,
) -> (i32, Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("explored.json");
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_stocklock"));
    command
        .args([
            "explore",
            "--variant",
            cell.0.name(),
            "--scenario",
            cell.1.name(),
            "--strategy",
            cell.2,
        ])
        .args([
            "--schedules",
            &schedules.to_string(),
            "--seed",
            "1",
            "--json",
        ])
        .arg(&json)
        .arg("--history")
        .arg(dir.path().join("history.jsonl"))
        .kill_on_drop(true);
    if let Some(mutant) = mutant {
        command.args(["--mutant", mutant]);
    }
    let _turn = helpers::stack_turn().await;
    let ran = command.output().await.unwrap();
    let said =
        String::from_utf8_lossy(&ran.stdout).into_owned() + &String::from_utf8_lossy(&ran.stderr);
    let code = ran.status.code().unwrap_or(-1);
    let report =
        std::fs::read_to_string(&json).unwrap_or_else(|_| panic!("no JSON (exit {code}): {said}"));
    // Every schedule's history is written, its SKU named by its run.
    let history = std::fs::read_to_string(dir.path().join("history.jsonl")).unwrap();
    let first = format!(
        "{{\"sku\":\"explore-{0}-{1}-1/x-{0}\",\"initial\":",
        cell.0.name(),
        cell.1.name()
    );
    assert!(
        history.starts_with(&first),
        "{}",
        &history[..history.len().min(300)]
    );
    (code, serde_json::from_str(&report).unwrap())
}

/// The database's locks explored from the command line: the explorer's
/// stack has PostgreSQL (without it every buyer would be told the store
/// is missing, and nothing explored), crashes strike (a dead holder's
/// transaction is ended, its lock freed, as a dead process's would be),
/// and no schedule breaks a property.
#[tokio::test]
async fn the_database_locks_are_explored_with_their_holders_crashing() {
    helpers::within(Duration::from_secs(300), async {
        if !stocklock::up::postgres::installed() {
            helpers::missing_tool("PostgreSQL is not installed (scripts/deps.sh postgresql)");
            return;
        }
        for cell in [
            (Variant::PgForUpdate, Scenario::CrashAfterAcquire, "pct"),
            (Variant::PgAdvisory, Scenario::KillInstance, "pct"),
        ] {
            let (code, report) = explore_cli(cell, 10, None).await;
            assert_eq!(code, 0, "{} in {}: {report}", cell.0, cell.1);
            assert_eq!(report["schedules"], 10, "{report}");
            assert!(report["found"].is_null(), "{report}");
            let crashes = report["struck"]["Crash"].as_u64().unwrap_or(0);
            assert!(
                crashes > 0,
                "{} in {}: no crash struck: {report}",
                cell.0,
                cell.1
            );
        }
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

/// `--target`: `explore` and `replay` play on a running chaos-mode stack
/// (its Redis named), and refuse, saying why, a stack without chaos mode.
#[tokio::test]
async fn explore_and_replay_play_on_a_running_chaos_stack_and_refuse_one_without() {
    helpers::within(Duration::from_secs(300), async {
        let run = |stack: &Stack, command: &'static str, extra: &'static [&'static str]| {
            let redis_url = stack.redis_url.clone().expect("up started its Redis");
            let (url, token) = (stack.url.clone(), stack.token.clone());
            async move {
                tokio::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
                    .args([command, "--variant", "none", "--scenario", "race"])
                    .args(extra)
                    .args([
                        "--target",
                        &url,
                        "--admin-token",
                        &token,
                        "--redis-url",
                        &redis_url,
                    ])
                    .kill_on_drop(true)
                    .output()
                    .await
                    .unwrap()
            }
        };
        let chaos = Stack::start_with(2, None, &["--chaos"]).await;
        let drawn = tempfile::tempdir().unwrap();
        let dir: &'static str =
            Box::leak(drawn.path().to_str().unwrap().to_owned().into_boxed_str());
        let explored = run(
            &chaos,
            "explore",
            Box::leak(Box::new(["--schedules", "5", "--timelines", dir])),
        )
        .await;
        let said = String::from_utf8_lossy(&explored.stdout);
        assert_eq!(explored.status.code(), Some(2), "{said}");
        assert!(
            said.contains("schedule 1 (seed 1) broke a property: oversold"),
            "{said}"
        );
        // The violating schedule's live drawing, beside the model's.
        let live = std::fs::read_to_string(drawn.path().join("race-none-explore.html")).unwrap();
        assert!(live.contains("gate_hold"), "the live drawing shows no gate");
        assert!(
            drawn.path().join("race-none-model.html").is_file(),
            "{said}"
        );
        let replayed = run(&chaos, "replay", &[]).await;
        let said = String::from_utf8_lossy(&replayed.stdout);
        assert_eq!(replayed.status.code(), Some(0), "{said}");
        assert!(
            said.contains("broken as the model says: they agree"),
            "{said}"
        );
        chaos.stop().await;
        let calm = Stack::start_with(2, None, &["--no-chaos"]).await;
        for command in ["explore", "replay"] {
            let refused = run(&calm, command, &[]).await;
            let said = String::from_utf8_lossy(&refused.stderr);
            assert_eq!(refused.status.code(), Some(1), "{command}: {said}");
            assert!(
                said.contains("refused a schedule") && said.contains("stocklock up --chaos"),
                "{command}: {said}"
            );
        }
        calm.stop().await;
    })
    .await;
}

/// Every process below `pid`, from `/proc` (each thread's children).
pub(crate) fn descendants(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut next = vec![pid];
    while let Some(parent) = next.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{parent}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                found.push(child);
                next.push(child);
            }
        }
    }
    found
}

/// `explore` killed (SIGKILL: no handler runs) takes its Redis and its
/// stack with it: `up` runs through the wrapper that dies with its parent.
#[tokio::test]
async fn a_killed_explore_leaves_no_stack_behind() {
    helpers::within(Duration::from_secs(120), async {
        let _turn = helpers::stack_turn().await;
        let mut explore = tokio::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
            .args(["explore", "--variant", "token", "--scenario", "race"])
            .args(["--schedules", "1000000"])
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = explore.id().unwrap();
        // Its Redis, `up`, Redlock's nodes, three instances and nginx (the
        // last `up` starts): all running once nginx is.
        let command = |p: &u32| std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
        let mut below = descendants(pid);
        while !below.iter().any(|p| command(p).starts_with(b"nginx")) {
            tokio::time::sleep(Duration::from_millis(100)).await;
            below = descendants(pid);
        }
        let instances = below
            .iter()
            .filter(|p| String::from_utf8_lossy(&command(p)).contains("\0serve\0"))
            .count();
        assert_eq!(instances, 3, "{below:?}");
        explore.start_kill().unwrap();
        explore.wait().await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let alive: Vec<u32> = below
                .iter()
                .copied()
                .filter(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
                .filter(|p| {
                    // A zombie is dead; it waits for its reaper.
                    let stat =
                        std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
                    !stat
                        .rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z')
                })
                .collect();
            if alive.is_empty() {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "still running 20 s after explore was killed: {alive:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
}
