//! `stocklock lab`, the whole matrix, as a user runs it.

use std::time::Duration;

use serde_json::Value;
use stocklock::lab::{SCENARIOS, expected};
use stocklock::variants::Variant;

#[tokio::test]
async fn the_lab_proves_the_whole_teaching_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("lab.json");
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
        .args(["lab", "--json", json.to_str().unwrap()])
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(600), run)
        .await
        .expect("the lab took more than 10 minutes")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stdout}\n{stderr}");
    assert!(output.status.success(), "a cell contradicts the matrix");

    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let cells = report["cells"].as_array().unwrap();
    // One cell for every (scenario, variant) the matrix has an expectation for.
    let mut wanted = 0;
    for scenario in SCENARIOS {
        for variant in Variant::ALL {
            if let Some(expected) = expected(scenario, &variant.info()) {
                wanted += 1;
                let cell = cells
                    .iter()
                    .find(|c| c["scenario"] == scenario && c["variant"] == variant.name())
                    .unwrap_or_else(|| panic!("no cell {scenario} / {variant}"));
                assert_eq!(cell["expected"], expected.as_str());
                assert_eq!(cell["pass"], true, "{cell}");
                assert!(!cell["evidence"].as_str().unwrap().is_empty());
            }
        }
    }
    assert_eq!(cells.len(), wanted);
    // The cells the articles are about, by name.
    let observed = |scenario: &str, variant: &str| {
        cells
            .iter()
            .find(|c| c["scenario"] == scenario && c["variant"] == variant)
            .map(|c| c["observed"].as_str().unwrap().to_owned())
            .unwrap()
    };
    assert_eq!(observed("race", "local-mutex"), "oversells");
    assert_eq!(observed("slow-business", "token"), "oversells");
    assert_eq!(observed("slow-business", "watchdog"), "safe");
    assert_eq!(observed("crash-after-setnx", "setnx"), "deadlock");
    assert_eq!(observed("pause-holder", "watchdog"), "oversells");
    assert_eq!(observed("pause-holder", "fenced"), "safe");
    assert_eq!(observed("clock-skew", "setnx-expiry"), "oversells");
    // Redlock's rows: five real redis-servers, killed and restarted by pid.
    assert_eq!(
        observed("redlock-minority-down", "redlock"),
        "keeps selling"
    );
    assert_eq!(observed("redlock-majority-down", "redlock"), "busy");
    assert_eq!(observed("pause-holder", "redlock"), "oversells");
    assert_eq!(
        observed("redlock-restart-without-persistence", "redlock"),
        "oversells"
    );
    assert_eq!(
        observed("redlock-restart-without-persistence", "fenced"),
        "safe"
    );
    assert_eq!(observed("race", "lua-sharded"), "safe");
    assert!(stdout.contains("cells in"), "{stdout}");
}

/// `--target`: the lab runs its scenarios on a stack it did not start.
#[tokio::test]
async fn the_lab_runs_against_a_running_chaos_stack() {
    let redis = crate::helpers::redis().await;
    let stack = crate::helpers::Stack::start_with(
        2,
        Some(&redis.url()),
        &["--chaos", "--clock-skew-ms", "0,5000"],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("lab.json");
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
        .args([
            "lab",
            "pause-holder",
            "clock-skew",
            "kill-instance",
            "redis-restart",
        ])
        .args(["--variant", "token,fenced,setnx-expiry"])
        .args([
            "--target",
            &stack.url,
            "--admin-token",
            &stack.token,
            "--redis-url",
            &redis.url(),
        ])
        .args(["--json", json.to_str().unwrap()])
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .unwrap()
        .unwrap();
    eprintln!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success());
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let cells: Vec<(String, String)> = report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["scenario"].as_str().unwrap().to_owned(),
                c["variant"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    // redis-restart is skipped: the lab did not start this Redis.
    assert_eq!(cells.len(), 8, "{cells:?}");
    assert!(
        cells
            .iter()
            .all(|(scenario, _)| scenario != "redis-restart")
    );
    assert!(
        report["cells"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["pass"] == true)
    );
    stack.stop().await;
}
