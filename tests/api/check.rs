//! `stocklock check` from the command line: the table with its traces and
//! bounds, the JSON, the drawings, the cells it does not model, and bad input.

use std::process::Command;

fn check(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_stocklock"))
        .arg("check")
        .args(args)
        .output()
        .expect("stocklock runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_cell_prints_its_shortest_counterexample_and_writes_it_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("check.json");
    let (code, out, err) = check(&[
        "--variant",
        "setnx,token",
        "--scenario",
        "crash-after-acquire",
        "--json",
        json.to_str().unwrap(),
        "--timelines",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("counterexample in 2 steps"), "{out}");
    assert!(out.contains("no violation within bounds in"), "{out}");
    assert!(
        out.contains("witness in") && out.contains("another buyer sells within a lease"),
        "{out}"
    );
    assert!(
        out.contains("2 cells checked") && out.contains("every model agrees"),
        "{out}"
    );
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let cells = written["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{written:#}");
    assert_eq!(
        (cells[0]["variant"].as_str(), cells[0]["model"].as_str()),
        (Some("setnx"), Some("deadlock"))
    );
    assert_eq!(cells[0]["trace"].as_array().unwrap().len(), 2);
    assert_eq!(cells[0]["trace"][1]["action"]["Crash"], 0);
    assert_eq!(
        (cells[1]["model"].as_str(), cells[1]["agrees"].as_bool()),
        (Some("frees"), Some(true))
    );
    assert_eq!(cells[1]["bounds"]["crashes"], 1);
    // token's frees rests on its witness: the holder dies, another sells.
    assert_eq!(cells[1]["trace"], serde_json::json!([]));
    let witness = cells[1]["witness"].as_array().unwrap();
    assert!(
        witness.iter().any(|s| s["action"]["Crash"].is_number()),
        "{written:#}"
    );
    assert_eq!(
        cells[1]["witnessed"],
        "another buyer sells within a lease of the holder's death"
    );
    // The counterexample and the witness drawn.
    assert!(
        out.contains("drew 2 counterexamples and witnesses"),
        "{out}"
    );
    let page =
        std::fs::read_to_string(dir.path().join("setnx-crash-after-acquire-model.html")).unwrap();
    assert!(page.contains("\"kind\":\"crash\""), "the crash is drawn");
    let page =
        std::fs::read_to_string(dir.path().join("token-crash-after-acquire-model.html")).unwrap();
    assert!(
        page.contains("\"kind\":\"crash\""),
        "the witness's crash is drawn"
    );
}

#[test]
fn cells_outside_the_matrix_are_said_so_and_bad_names_refused() {
    // Every cell of the matrix has a model: Redis's restart included.
    let (code, out, err) = check(&["--variant", "token,lua", "--scenario", "redis-restart"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("2 cells checked"), "{out}");
    for variant in ["token", "lua"] {
        let line = out
            .lines()
            .find(|l| l.starts_with(variant) && l.contains("redis-restart"))
            .unwrap_or_else(|| panic!("no {variant} line: {out}"));
        assert!(line.contains("recovers   recovers"), "{line}");
    }
    assert!(out.contains("1 Redis outage"), "{out}");
    // setnx claims nothing of a Redis restart: no cell to check.
    let (code, out, err) = check(&["--variant", "setnx", "--scenario", "redis-restart"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("no cell of the matrix matches"), "{out}");
    let (code, _, err) = check(&["--variant", "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("no variant \"nope\""), "{err}");
    let (code, _, err) = check(&["--scenario", "tornado"]);
    assert_eq!(code, 2);
    assert!(err.contains("invalid value 'tornado'"), "{err}");
}

/// `GET /api/check` on the instance's real router: a counterexample with
/// its drawing, a safe cell with its states and none, a cell outside
/// the matrix (404) and bad names (400), each as the project's JSON error.
#[tokio::test]
async fn the_dashboard_answers_a_cells_verdict_and_its_drawn_trace() {
    use stocklock::chaos::Chaos;
    use stocklock::store::Store;

    use crate::helpers::{self, InProcess};

    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let instance = InProcess::start(&store, "a", Chaos::off()).await;

    let (status, body) = instance
        .get("/api/check?variant=setnx&scenario=crash-after-acquire")
        .await;
    assert_eq!(status, 200, "{body}");
    let verdict = &body["verdict"];
    assert_eq!(verdict["model"], "deadlock", "{body}");
    assert_eq!(verdict["agrees"], true, "{body}");
    assert_eq!(verdict["trace"].as_array().unwrap().len(), 2, "{body}");
    assert_eq!(verdict["bounds"]["crashes"], 1, "{body}");
    // The same trace as the library draws it, in the live timeline's shape.
    let cell = stocklock::check::check(
        stocklock::variants::Variant::Setnx,
        stocklock::variants::Scenario::CrashAfterAcquire,
    )
    .unwrap();
    let drawn = stocklock::check::draw::timeline(&cell).unwrap();
    assert_eq!(body["timeline"], serde_json::to_value(&drawn).unwrap());
    let events = body["timeline"]["events"].as_array().unwrap();
    assert!(events.iter().any(|e| e["kind"] == "crash"), "{body}");
    // Asked again (answered from what the instance remembers): the same.
    let (_, again) = instance
        .get("/api/check?variant=setnx&scenario=crash-after-acquire")
        .await;
    assert_eq!(again, body);

    // No counterexample: the states it searched, and its witness drawn.
    let (status, body) = instance.get("/api/check?variant=lua&scenario=race").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["verdict"]["model"], "safe", "{body}");
    assert!(body["verdict"]["states"].as_u64().unwrap() > 1, "{body}");
    assert_eq!(body["verdict"]["trace"], serde_json::json!([]), "{body}");
    assert_eq!(body["verdict"]["witnessed"], "a unit is sold", "{body}");
    let sections = body["timeline"]["sections"].as_array().unwrap();
    assert_eq!(sections.len(), 1, "{body}");
    assert_eq!(sections[0]["outcome"], "sold", "{body}");

    // A scenario that does not apply to the variant: no cell.
    let (status, body) = instance
        .get("/api/check?variant=setnx&scenario=redis-restart")
        .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"], "not_found", "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("no cell for setnx in redis-restart"),
        "{body}"
    );

    for (query, field) in [
        ("variant=nope&scenario=race", "variant"),
        ("variant=lua&scenario=tornado", "scenario"),
        ("variant=lua", "scenario"),
        ("variant=lua&scenario=race&extra=1", "extra"),
    ] {
        let (status, body) = instance.get(&format!("/api/check?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"], "invalid_input", "{query}: {body}");
        assert!(
            body["detail"].as_str().unwrap().contains(field),
            "{query}: {body}"
        );
    }
}

/// The bounds set from the command line reach the cell and its line; a
/// bound out of range is refused.
#[test]
fn the_bounds_can_be_set_from_the_command_line() {
    let (code, out, err) = check(&[
        "--variant",
        "token",
        "--scenario",
        "race",
        "--buyers",
        "2",
        "--stock",
        "1",
        "--lease",
        "3",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("race: 2 buyers, stock 1, lease 3"), "{out}");
    assert!(out.contains("no violation within bounds"), "{out}");
    let (code, _, err) = check(&["--buyers", "9"]);
    assert_eq!(code, 2);
    assert!(err.contains("--buyers"), "{err}");
}
