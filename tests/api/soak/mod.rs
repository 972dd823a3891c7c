//! `stocklock soak`: two minutes of every fault kind in turn under load on
//! every variant (reservations expiring as they go) break no claim, and the history checker agrees with the
//! soak's judge on every round; and its judge, fed a history on a real
//! stack, finds an oversell where the claims are safe and counts the same
//! oversell where a fault that struck claims it, while the history checker
//! finds it in what the buyers were told.
//!
//! This file: a soak run as a user runs it, and one buyer's attempt as the
//! soak records it; `runs.rs`: whole soaks; `judged.rs`: its judge fed a
//! history; `stacks.rs`: a store relay frozen, and a soak whose stack is
//! gone.

use std::time::{Duration, Instant};

use stocklock::soak::buyers::{Attempt, Request};
use stocklock::wire::SoakReport;

use crate::helpers::{stack_turn, within};

mod judged;
mod runs;
mod stacks;

/// `stocklock soak ARGS --json FILE --history FILE` on a stack of its
/// own, within `bound` seconds: its exit, its output (shown), its report
/// and every round's history.
pub(crate) async fn soak(
    args: &[&str],
    bound: u64,
) -> (std::process::Output, String, SoakReport, String) {
    let _turn = stack_turn().await;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("soak.json");
    let history = dir.path().join("soak.jsonl");
    let run = within(Duration::from_secs(bound), async {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
            .arg("soak")
            .args(args)
            .arg("--json")
            .arg(&json)
            .arg("--history")
            .arg(&history)
            .kill_on_drop(true)
            .output()
            .await
            .unwrap()
    })
    .await;
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    eprintln!("{stdout}\n{}", String::from_utf8_lossy(&run.stderr));
    let report = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let history = std::fs::read_to_string(&history).unwrap();
    (run, stdout, report, history)
}

/// One buyer's request `id` sent once to `path` through `client`, as the
/// soak's buyers record it (its time from `started`).
pub(crate) async fn one_attempt(
    client: &stocklock::client::StackClient,
    path: &str,
    id: String,
    started: Instant,
) -> Request {
    let at_ms = started.elapsed().as_millis() as u64;
    let answer = client.deduct(path).await;
    Request {
        id,
        attempts: vec![Attempt {
            at_ms,
            took_ms: answer.took.as_millis() as u64,
            status: answer.status,
            got: stocklock::soak::buyers::got(&answer),
            reason: None,
            instance: None,
            replayed: false,
        }],
    }
}
