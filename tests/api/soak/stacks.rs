//! The soak's stack: a frozen store relay cuts its instance off, and a
//! soak whose stack is gone stops and says so.

use std::time::{Duration, Instant};

use crate::helpers::{Stack, stack_turn, within};

/// `up --store-relays`: each instance reaches Redis through a relay of its
/// own; freezing one cuts its instance off (it cannot sell, the other can),
/// and once it runs again the instance sells again. The relays die with `up`.
#[tokio::test]
async fn a_frozen_store_relay_cuts_its_instance_off_from_redis_and_only_it() {
    let stack = Stack::start_with(2, None, &["--store-relays"]).await;
    within(Duration::from_secs(120), async {
        assert_eq!(stack.relays.len(), 2, "{:?}", stack.relays);
        stack.reset("relayed", 10).await;
        let a = stack.client.at(&stack.instances[0].url);
        let b = stack.client.at(&stack.instances[1].url);
        let path = |n: u32| format!("/deductStock/lua?sku=relayed&request_id=r-{n}");
        assert!(a.deduct(&path(1)).await.sold());

        let relay = stack.relays[0].pid;
        stocklock::os::freeze(relay).await.unwrap();
        let cut = a.deduct(&path(2)).await;
        assert_eq!(cut.status, 503, "{cut:?}");
        assert!(b.deduct(&path(3)).await.sold(), "b was cut off too");
        stocklock::os::signal(relay, nix::sys::signal::Signal::SIGCONT);

        // The held request id settles through a retry, as a client's would.
        let deadline = Instant::now() + Duration::from_secs(30);
        let again = loop {
            let answer = a.deduct(&path(2)).await;
            if answer.status != 503 || Instant::now() > deadline {
                break answer;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(again.sold(), "{again:?}");
        assert_eq!(stack.state("relayed").await.sold, 3);
    })
    .await;
    let relays: Vec<u32> = stack.relays.iter().map(|r| r.pid).collect();
    stack.stop().await;
    for pid in relays {
        assert!(!crate::helpers::alive(pid), "relay {pid} outlived up");
    }
}

/// A soak whose stack is gone (its `up` killed) stops at once and says so:
/// nothing can be sold or judged any more, and its buyers would ask a dead
/// stack for ever (a 30-minute soak went on so, past its end, once a
/// restart of Redis had stopped its `up`).
#[tokio::test]
async fn a_soak_whose_stack_is_gone_stops_and_says_so() {
    use tokio::io::AsyncBufReadExt;
    let _turn = stack_turn().await;
    let mut soak = tokio::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
        .args(["soak", "--minutes", "2", "--seed", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = soak.id().unwrap();
    let mut lines = tokio::io::BufReader::new(soak.stdout.take().unwrap()).lines();
    within(Duration::from_secs(180), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.starts_with("follow it on the dashboard") {
                return;
            }
        }
        panic!("the soak ended before it began");
    })
    .await;
    // (Read on: a closed pipe would fail the soak's next line.)
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    // Its `up` (whatever wraps it), killed with no chance to clean up.
    let up: Vec<u32> = crate::explore::descendants(pid)
        .into_iter()
        .filter(|child| {
            let line = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
            line.split(|b| *b == 0).nth(1) == Some(b"up".as_slice())
        })
        .collect();
    assert_eq!(up.len(), 1, "the soak's up: {up:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(up[0] as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let killed = Instant::now();
    let ran = within(Duration::from_secs(60), soak.wait_with_output())
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&ran.stderr);
    assert!(
        !ran.status.success() && said.contains("the stack stopped"),
        "exit {:?} {:?} after the kill: {said}",
        ran.status,
        killed.elapsed()
    );
}

/// Two faults on one server drawn for the same moment (seed 8: PostgreSQL
/// killed and stopped at 3 s) strike one after the other: the stop waits
/// for the kill's restart and freezes the new server, never the dead one's
/// pid (which it once read while `up` was still restarting it, and then
/// failed: "not stopped 5 s after SIGSTOP").
#[tokio::test]
async fn two_faults_on_one_server_at_once_strike_one_after_the_other() {
    if !stocklock::up::postgres::installed() {
        crate::helpers::missing_tool("PostgreSQL is not installed (scripts/deps.sh postgresql)");
        return;
    }
    let (run, _, report, _) = super::soak(
        &[
            "--minutes",
            "0.1",
            "--seed",
            "8",
            "--faults",
            "kill-postgres,stop-postgres",
            "--variant",
            "pg-update",
        ],
        300,
    )
    .await;
    let faults: Vec<(&str, &str)> = report
        .faults
        .iter()
        .map(|f| (f.kind.as_str(), f.error.as_str()))
        .collect();
    assert_eq!(faults.len(), 2, "{:?}", report.faults);
    assert!(
        faults.iter().all(|(_, error)| error.is_empty()),
        "{:?}",
        report.faults
    );
    assert!(run.status.success(), "exit {:?}", run.status);
}
