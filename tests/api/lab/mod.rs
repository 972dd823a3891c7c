//! `stocklock lab`, the whole matrix, as a user runs it; and the lab
//! catching a variant broken on purpose, and playing on a stack it did
//! not start.

mod evidence;
mod matrix;

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

/// `--sku-prefix` (a classroom seat's SKUs) plays only on a running stack
/// and only the scenarios that touch nothing but their SKU: anything else
/// is refused before a stack is touched, saying why.
#[test]
fn a_sku_prefix_plays_only_the_per_sku_scenarios_on_a_target() {
    let lab = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
            .arg("lab")
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, said) = lab(&["race", "--sku-prefix", "seat-1-"]);
    assert!(!ok && said.contains("--target"), "{said}");
    let target = [
        "--target",
        "http://127.0.0.1:9",
        "--admin-token",
        "t",
        "--redis-url",
        "redis://127.0.0.1:9",
        "--sku-prefix",
    ];
    let (ok, said) = lab(&[
        &["pause-holder", "--variant", "watchdog"],
        &target[..],
        &["seat-1-"],
    ]
    .concat());
    assert!(!ok, "{said}");
    assert!(
        said.contains("(one-instance, race, slow-business); pause-holder does more"),
        "{said}"
    );
    let (ok, said) = lab(&[&["race", "--variant", "none"], &target[..], &["seat 1"]].concat());
    assert!(!ok && said.contains("--sku-prefix \"seat 1\""), "{said}");
}
