//! `stocklock lab`, the whole matrix, as a user runs it; and the lab
//! catching a variant broken on purpose.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;
use stocklock::lab::Scenario;
use stocklock::variants::Variant;

/// Runs `stocklock lab ARGS --json FILE` (with `env` added); its output,
/// printed, and the report.
pub(crate) async fn lab(
    args: &[&str],
    env: &[(&str, &str)],
    within: Duration,
) -> (std::process::Output, Value) {
    // A lab that starts its own stack takes the machine's turn; one aimed
    // at a test's stack (--target) runs in that stack's turn.
    let _turn = match args.contains(&"--target") {
        true => None,
        false => Some(crate::helpers::stack_turn().await),
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("lab.json");
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
        .arg("lab")
        .args(args)
        .args(["--json", json.to_str().unwrap()])
        .envs(env.iter().copied())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(within, run)
        .await
        .expect("the lab took too long")
        .unwrap();
    eprintln!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let report = serde_json::from_slice(&std::fs::read(&json).expect("no report")).unwrap();
    (output, report)
}

pub(crate) fn find(cells: &[Value], scenario: Scenario, variant: Variant) -> Option<&Value> {
    cells
        .iter()
        .find(|c| c["scenario"] == scenario.name() && c["variant"] == variant.name())
}

#[tokio::test]
async fn the_lab_proves_the_whole_teaching_matrix() {
    let (output, report) = lab(&[], &[], Duration::from_secs(600)).await;
    assert!(output.status.success(), "a cell failed");
    let cells = report["cells"].as_array().unwrap();

    // One cell for every claim that applies, observed as claimed, with its evidence.
    let mut wanted = 0;
    for scenario in Scenario::ALL {
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
    for scenario in Scenario::ALL {
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
    assert_eq!(
        discriminating,
        [
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
    );

    // The pairs the articles are about, by name: one judge, both verdicts.
    let observed = |scenario, variant| {
        find(cells, scenario, variant).unwrap()["observed"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    for (scenario, fails, failure, holds, success) in [
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
    ] {
        assert_eq!(observed(scenario, fails), failure, "{scenario} / {fails}");
        assert_eq!(observed(scenario, holds), success, "{scenario} / {holds}");
    }
    assert_eq!(
        observed(Scenario::RedlockMinorityDown, Variant::Redlock),
        "keeps selling"
    );
    assert_eq!(
        observed(Scenario::RedlockMajorityDown, Variant::Redlock),
        "busy"
    );
    assert_eq!(observed(Scenario::Race, Variant::LuaSharded), "safe");
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

    // Safe for the reason the claim gives, shown in the evidence.
    let evidence = |scenario, variant| {
        find(cells, scenario, variant).unwrap()["evidence"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    for (scenario, variant, cause) in [
        (
            Scenario::PauseHolder,
            Variant::Fenced,
            "holder answered 429 stale_token",
        ),
        (
            Scenario::LockVanishesEarly,
            Variant::Watchdog,
            "holder answered 429 lock_lost",
        ),
        (
            Scenario::LockVanishes,
            Variant::Watchdog,
            "lock deleted after the holder's renewal at ",
        ),
        (
            Scenario::LockVanishes,
            Variant::Fenced,
            "holder answered 429 stale_token",
        ),
        (
            Scenario::ClockSkew,
            Variant::Token,
            "the newcomer 429 lock_held",
        ),
        (
            Scenario::CrashAfterAcquire,
            Variant::Setnx,
            "lock after: held with no TTL",
        ),
        (
            Scenario::KillInstance,
            Variant::Token,
            "announced from inside its section",
        ),
        (Scenario::RedisRestart, Variant::Lua, "while down: 503"),
        (Scenario::RedisPause, Variant::LuaBatch, "0 unresolved"),
        (Scenario::Failover, Variant::Token, "Sentinel promoted"),
        (Scenario::Failover, Variant::Etcd, "etcd leader"),
        (Scenario::Failover, Variant::ZooKeeper, "ZooKeeper leader"),
        (
            Scenario::FailoverWaitEarly,
            Variant::Token,
            "holder answered 429 not_replicated",
        ),
        // The new master's ledger was rolled back with the sale: the two
        // answers show the unit sold twice.
        (Scenario::FailoverWait, Variant::Token, "unit 5 sold twice"),
    ] {
        let text = evidence(scenario, variant);
        assert!(text.contains(cause), "{scenario} / {variant}: {text}");
    }
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("cells in"),
        "no summary line"
    );
}

/// `redis-pause` on its own: its three cells (`lua`, `lua-batch`,
/// `lua-sharded`), each with buyers told `unknown` whose ids all resolved.
#[tokio::test]
async fn the_lab_sees_every_id_resolve_after_a_redis_pause() {
    let (output, report) = lab(&["redis-pause"], &[], Duration::from_secs(180)).await;
    assert!(output.status.success(), "a cell failed");
    let cells = report["cells"].as_array().unwrap();
    let variants: Vec<&str> = cells
        .iter()
        .map(|c| c["variant"].as_str().unwrap())
        .collect();
    assert_eq!(variants, ["lua", "lua-batch", "lua-sharded"]);
    for cell in cells {
        assert_eq!(cell["observed"], "safe", "{cell}");
        let evidence = cell["evidence"].as_str().unwrap();
        let in_doubt: usize = evidence
            .split_once(" answered unknown")
            .and_then(|(before, _)| before.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{evidence}"));
        assert!(in_doubt > 0, "{evidence}");
        assert!(evidence.contains(", 0 unresolved;"), "{evidence}");
    }
}

/// A safe variant broken on purpose: `fenced` with its fence skipped (the
/// live mutant `no-fence` of a debug build, `STOCKLOCK_MUTANT`, inherited
/// by `up` and its instances) must fail its pause-holder cell, and the run with it; the
/// checker's verdicts sit beside the live ones, and token's counterexample
/// is drawn beside its live timeline.
#[tokio::test]
async fn the_lab_flags_a_safe_variant_broken_on_purpose() {
    let timelines = tempfile::tempdir().unwrap();
    let (output, report) = lab(
        &[
            "pause-holder",
            "--variant",
            "fenced,token",
            "--timelines",
            timelines.path().to_str().unwrap(),
        ],
        &[("STOCKLOCK_MUTANT", "no-fence")],
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(output.status.code(), Some(2));
    let all = report["cells"].as_array().unwrap();
    assert_eq!(all.len(), 2);
    let token = find(all, Scenario::PauseHolder, Variant::Token).unwrap();
    let cells = [find(all, Scenario::PauseHolder, Variant::Fenced)
        .unwrap()
        .clone()];
    assert_eq!(cells[0]["expected"], "safe (stale token refused)");
    assert_eq!(cells[0]["observed"], "oversells", "{}", cells[0]);
    assert_eq!(cells[0]["pass"], false);
    // The checker's verdict beside the live one: the model of fenced (not
    // sabotaged) finds no schedule that breaks it; token's shortest
    // oversell is drawn beside its live timeline.
    let model = cells[0]["model"].as_str().unwrap();
    assert!(
        model.starts_with("safe: no violation within bounds ("),
        "{model}"
    );
    assert_eq!(
        token["model"], "oversells: counterexample in 12 steps",
        "{token}"
    );
    let drawn = timelines.path().join("pause-holder-token-model.html");
    assert!(
        token["evidence"]
            .as_str()
            .unwrap()
            .ends_with(&format!("the model's trace: {}", drawn.display())),
        "{token}"
    );
    let html = std::fs::read_to_string(&drawn).unwrap();
    assert!(html.contains("token · pause-holder (model)") && html.contains("\"kind\":\"freeze\""));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("CONTRADICTION pause-holder / fenced")
    );
    // The cell's evidence names its timeline (the two holders at once, the
    // freeze), then the witness the model's verdict rests on.
    let file = timelines.path().join("pause-holder-fenced.html");
    let witness = timelines.path().join("pause-holder-fenced-model.html");
    let evidence = cells[0]["evidence"].as_str().unwrap();
    assert!(
        evidence.ends_with(&format!(
            "timeline {}; the model's witness: {}",
            file.display(),
            witness.display()
        )),
        "{evidence}"
    );
    assert!(witness.exists(), "{evidence}");
    let html = std::fs::read_to_string(&file).unwrap();
    assert!(html.contains("\"kind\":\"freeze\""), "the freeze is drawn");
    let data = &html[html.find("\"overlaps\":[[").expect("an overlapping pair")..];
    assert!(data.starts_with("\"overlaps\":[[0,1]]"), "{}", &data[..40]);
}

/// `--target`: the lab runs its scenarios on a stack it did not start,
/// skewing instance b's clock itself for clock-skew.
#[tokio::test]
async fn the_lab_runs_against_a_running_chaos_stack() {
    let redis = crate::helpers::redis().await;
    let stack = crate::helpers::Stack::start_with(2, Some(&redis.url()), &["--chaos"]).await;
    let (output, report) = lab(
        &[
            "pause-holder",
            "clock-skew",
            "kill-instance",
            "redis-restart",
            "--variant",
            "token,fenced,setnx-expiry",
            "--target",
            &stack.url,
            "--admin-token",
            &stack.token,
            "--redis-url",
            &redis.url(),
        ],
        &[],
        Duration::from_secs(300),
    )
    .await;
    assert!(output.status.success());
    let cells = report["cells"].as_array().unwrap();
    let names: Vec<(&str, &str)> = cells
        .iter()
        .map(|c| {
            (
                c["scenario"].as_str().unwrap(),
                c["variant"].as_str().unwrap(),
            )
        })
        .collect();
    // redis-restart is skipped: the lab did not start this Redis.
    assert_eq!(names.len(), 8, "{names:?}");
    assert!(
        names
            .iter()
            .all(|(scenario, _)| *scenario != "redis-restart")
    );
    assert!(cells.iter().all(|c| c["pass"] == true));
    let skewed = find(cells, Scenario::ClockSkew, Variant::SetnxExpiry).unwrap();
    assert_eq!(skewed["observed"], "oversells");
    assert!(
        skewed["evidence"]
            .as_str()
            .unwrap()
            .contains("the newcomer's clock 5000 ms ahead")
    );
    stack.stop().await;
}
