//! `stocklock history check`, run as a user runs it, on files written by
//! hand: each verdict's exit status, the JSON, the picture, bad input.
//! (Histories recorded by live runs are judged in the tests of those runs.)

use std::path::Path;
use std::process::Output;

use serde_json::Value;

fn check(file: &Path, extra: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
        .args(["history", "check"])
        .arg(file)
        .args(extra)
        .output()
        .expect("run stocklock history check")
}

fn write(dir: &Path, name: &str, lines: &[&str]) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n")).unwrap();
    path
}

#[test]
fn each_verdict_has_its_exit_status_its_json_and_its_picture() {
    let dir = tempfile::tempdir().unwrap();
    let fine = write(
        dir.path(),
        "fine.jsonl",
        &[
            r#"{"sku":"a","initial":1}"#,
            r#"{"sku":"a","client":1,"id":"r1","call":0,"ret":10,"outcome":"sold","unit":1}"#,
            r#"{"sku":"a","client":2,"call":5,"ret":20,"outcome":"sold_out"}"#,
        ],
    );
    let output = check(&fine, &[]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("linearizable"));
    assert!(
        !dir.path().join("fine.html").exists(),
        "no picture of a pass"
    );

    // Told "sold out" before the only unit was even asked for: exit 3.
    let lie = write(
        dir.path(),
        "lie.jsonl",
        &[
            r#"{"sku":"a","initial":1}"#,
            r#"{"sku":"a","client":2,"call":0,"ret":5,"outcome":"sold_out"}"#,
            r#"{"sku":"a","client":1,"call":10,"ret":20,"outcome":"sold","unit":1}"#,
            r#"{"sku":"b","initial":2}"#,
            r#"{"sku":"b","client":3,"call":0,"ret":5,"outcome":"busy"}"#,
        ],
    );
    let json = dir.path().join("lie-verdicts.json");
    let output = check(&lie, &["--json", json.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert!(report["elapsed_ms"].is_u64());
    let skus = report["skus"].as_array().unwrap();
    assert_eq!(skus[0]["sku"], "a");
    assert_eq!(skus[0]["ops"], 2);
    assert_eq!(skus[0]["verdict"], "not_linearizable");
    assert_eq!(skus[0]["lines"], serde_json::json!([2]), "{}", skus[0]);
    assert!(skus[0]["why"].as_str().unwrap().contains("line 2"));
    assert_eq!(skus[1]["verdict"], "linearizable");
    let picture = std::fs::read_to_string(dir.path().join("lie-verdicts.html")).unwrap();
    assert!(picture.contains("<svg") && picture.contains("no order by here"));
    assert!(
        picture.contains("line 2: client 2 sold_out [0, 5]"),
        "{picture}"
    );

    // A unit sold twice: exit 2, and the picture beside the history when
    // no JSON was asked for.
    let twice = write(
        dir.path(),
        "twice.jsonl",
        &[
            r#"{"sku":"a","initial":2}"#,
            r#"{"sku":"a","client":1,"call":0,"ret":10,"outcome":"sold","unit":2}"#,
            r#"{"sku":"a","client":2,"call":0,"ret":10,"outcome":"sold","unit":2}"#,
        ],
    );
    let output = check(&twice, &[]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("unit 2 was sold 2 times"), "{stdout}");
    assert!(dir.path().join("twice.html").exists());
}

#[test]
fn bad_input_exits_1_and_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(
        dir.path(),
        "bad.jsonl",
        &[
            r#"{"sku":"a","initial":1}"#,
            r#"{"sku":"a","client":1,"call":9,"ret":3,"outcome":"sold","unit":1}"#,
        ],
    );
    let output = check(&bad, &[]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("line 2: ret 3 is before call 9"),
        "{stderr}"
    );
    let output = check(&dir.path().join("missing.jsonl"), &[]);
    assert_eq!(output.status.code(), Some(1));
    let output = check(&bad, &["--timeout-s", "0"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--timeout-s"));
}
