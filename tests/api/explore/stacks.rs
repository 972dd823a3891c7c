//! The explorer and the stacks it plays on: a running chaos stack named
//! with `--target` (and one without chaos mode refused), and an explore
//! killed outright taking its stack with it.

use std::time::Duration;

use super::descendants;
use crate::helpers::{self, Stack};

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
