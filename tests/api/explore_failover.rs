//! `stocklock explore` of a failover: the lock's Redis held back from its
//! replica and failed over at steps a schedule chooses, on a stack of the
//! schedule's own, breaks `token` as the checker says, and its seed breaks
//! it again; with `WAIT` asked before the lock is used, a failover between
//! the lock and the `WAIT` breaks nothing.

use std::time::Duration;

use serde_json::Value;

use crate::helpers;

/// `stocklock explore` of `variant` in `scenario`: `schedules` from
/// `seed`; its exit code and JSON.
async fn explore(variant: &str, scenario: &str, schedules: u64, seed: u64) -> (i32, Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("explored.json");
    let (schedules, seed) = (schedules.to_string(), seed.to_string());
    let _turn = helpers::stack_turn().await;
    let ran = tokio::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
        .args(["explore", "--variant", variant, "--scenario", scenario])
        .args(["--schedules", &schedules, "--seed", &seed, "--json"])
        .arg(&json)
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let code = ran.status.code().unwrap_or(-1);
    let said =
        String::from_utf8_lossy(&ran.stdout).into_owned() + &String::from_utf8_lossy(&ran.stderr);
    let report =
        std::fs::read_to_string(&json).unwrap_or_else(|_| panic!("no JSON (exit {code}): {said}"));
    (code, serde_json::from_str(&report).unwrap())
}

/// The faults among a schedule's steps (`{"HoldReplication": null}`, or a
/// step with fields: its name).
fn faults(steps: &Value) -> Vec<String> {
    let name = |step: &Value| match step {
        Value::String(name) => Some(name.clone()),
        Value::Object(map) => map.keys().next().cloned(),
        _ => None,
    };
    (steps.as_array().unwrap().iter())
        .filter_map(name)
        .filter(|n| ["HoldReplication", "Failover"].contains(&n.as_str()))
        .collect()
}

/// The seed of the first schedule from seed 1 that breaks `token` in
/// `failover` (its sale did not reach the replica: the new master has the
/// unit back in stock, whether or not it sells it again): a search from
/// seed 1 finds it within this many schedules.
const SEED: u64 = 5;

#[tokio::test]
async fn a_failover_explored_on_stacks_of_its_own_breaks_token_as_the_checker_says() {
    helpers::within(Duration::from_secs(300), async {
        let (code, explored) = explore("token", "failover", SEED, 1).await;
        let found = &explored["found"];
        assert!(
            code == 2 && !found.is_null(),
            "token in failover: nothing broke in {SEED} schedules (exit {code}): {explored}"
        );
        let ledger = found["ledger"].as_str().unwrap();
        assert!(
            ledger.contains("units answered sold twice")
                || ledger.contains("answered sold that the new master's books do not hold"),
            "broke, but no sale was lost: {ledger}"
        );
        // The history checker, from the answers and the new master's
        // books alone, says the same.
        assert!(
            found["history"].as_str().unwrap().starts_with("unsafe")
                && found["disagreement"].is_null(),
            "{found}"
        );
        assert_eq!(faults(&found["steps"]), ["HoldReplication", "Failover"]);
        let seed = found["seed"].as_u64().unwrap();
        let (code, again) = explore("token", "failover", 1, seed).await;
        assert!(code == 2, "seed {seed} did not break it again: {again}");
        assert_eq!(
            again["found"]["steps"], found["steps"],
            "seed {seed} chose otherwise"
        );
    })
    .await;
}

/// The schedule that found `WAIT` vouching for a lock a failover had
/// taken away: replication held back after A's sale, B takes its lock on
/// the old master, the master dies, and B's `WAIT` on the new master is
/// answered by the new master's replica, which has everything the new
/// master has, B's lock not among it. B went on without its lock and C
/// sold its unit again (oversold 1); B now finds its lock gone and gives
/// up, as the model's `WAIT` (the replica has the buyer's lock, or not).
const WAIT_SEED: u64 = 9;

#[tokio::test]
async fn a_wait_after_a_failover_that_took_the_lock_vouches_for_nothing() {
    helpers::within(Duration::from_secs(300), async {
        let (code, explored) = explore("token", "failover-wait-early", 1, WAIT_SEED).await;
        assert!(
            code == 0 && explored["found"].is_null(),
            "token in failover-wait-early: seed {WAIT_SEED} broke (exit {code}): {explored}"
        );
        assert_eq!(
            (
                &explored["struck"]["HoldReplication"],
                &explored["struck"]["Failover"]
            ),
            (&Value::from(1), &Value::from(1)),
            "the seed no longer fails the master over: {explored}"
        );
    })
    .await;
}
