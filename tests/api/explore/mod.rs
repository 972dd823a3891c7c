//! `stocklock explore`: schedules of the real code chosen by PCT on a live
//! stack find the failures the checker finds, and find none where it
//! finds none (the matrix); the command line's mutants, database locks and
//! paused Redis; the stacks it plays on.

mod cli;
mod matrix;
mod stacks;

use serde_json::Value;

use stocklock::variants::{Scenario, Variant};

use crate::helpers;

/// `stocklock explore` on a stack of its own: its exit code, what it
/// said, and the directory its JSON and history were written to.
async fn explore_run(
    cell: (Variant, Scenario, &str),
    schedules: usize,
    mutant: Option<&str>,
) -> (i32, String, tempfile::TempDir) {
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
    (code, said, dir)
}

/// `stocklock explore` on a stack of its own: its exit code and what it
/// said (stdout and stderr), for a run that may end in an error.
pub(crate) async fn explore_said(
    cell: (Variant, Scenario, &str),
    schedules: usize,
    mutant: Option<&str>,
) -> (i32, String) {
    let (code, said, _) = explore_run(cell, schedules, mutant).await;
    (code, said)
}

/// `stocklock explore` on a stack of its own; its exit code and JSON.
pub(crate) async fn explore_cli(
    cell: (Variant, Scenario, &str),
    schedules: usize,
    mutant: Option<&str>,
) -> (i32, Value) {
    let (code, said, dir) = explore_run(cell, schedules, mutant).await;
    let json = dir.path().join("explored.json");
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
