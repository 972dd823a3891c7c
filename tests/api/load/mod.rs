//! `stocklock load`, run as a user runs it, against a real stack
//! (`all_variants.rs`: the article's flash sale on every variant).
use std::process::Output;
use std::time::Duration;

use tokio::process::Command;

use crate::helpers::Stack;

mod all_variants;
mod books;

/// Runs `stocklock load ARGS` against `target` (bounded in time).
pub(super) async fn load(target: &str, token: &str, args: &[&str]) -> Output {
    let run = Command::new(env!("CARGO_BIN_EXE_stocklock"))
        .arg("load")
        .args(["--target", target, "--admin-token", token])
        .args(args)
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("stocklock load did not finish within 120 s")
        .expect("run stocklock load");
    eprintln!(
        "$ stocklock load {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

#[tokio::test]
async fn check_fails_exactly_when_a_verdict_contradicts_its_expectation() {
    let stack = Stack::start(2, None).await;
    let race = [
        "--stock",
        "50",
        "--requests",
        "200",
        "--concurrency",
        "32",
        "--work-ms",
        "2",
        "--check",
    ];

    // local-mutex oversells with two instances: what the matrix says...
    let output = load(
        &stack.url,
        &stack.token,
        &[&["--variant", "local-mutex"], &race[..]].concat(),
    )
    .await;
    assert_eq!(output.status.code(), Some(0));
    // ...so checking it for safety fails.
    let output = load(
        &stack.url,
        &stack.token,
        &[&["--variant", "local-mutex", "--expect", "safe"], &race[..]].concat(),
    )
    .await;
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("CONTRADICTION local-mutex"));
    // lua is safe under the same load.
    let output = load(
        &stack.url,
        &stack.token,
        &[&["--variant", "lua", "--expect", "safe"], &race[..]].concat(),
    )
    .await;
    assert_eq!(output.status.code(), Some(0));
    // A broken variant that stays safe where it was meant to fail is a contradiction too.
    let output = load(
        &stack.url,
        &stack.token,
        &[&["--variant", "lua", "--expect", "oversells"], &race[..]].concat(),
    )
    .await;
    assert_eq!(output.status.code(), Some(2));

    // token, expected safe, with a lease shorter than the work: every waiter
    // takes the lock when the holder's lease runs out, mid-work. Oversells
    // every time, so --check fails.
    let output = load(
        &stack.url,
        &stack.token,
        &[
            "--variant",
            "token",
            "--stock",
            "50",
            "--requests",
            "12",
            "--concurrency",
            "4",
            "--lease-ms",
            "50",
            "--work-ms",
            "200",
            "--wait-ms",
            "10000",
            "--check",
        ],
    )
    .await;
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("CONTRADICTION token: expected safe, observed OVERSOLD"),
        "{stderr}"
    );
    stack.stop().await;
}

#[tokio::test]
async fn a_stopped_target_is_a_clear_error_not_a_hang() {
    let port = stocklock::os::free_port().unwrap();
    let target = format!("http://127.0.0.1:{port}");
    let started = std::time::Instant::now();
    let output = load(&target, "t", &["--variant", "lua", "--requests", "10"]).await;
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot connect"), "{stderr}");
    assert!(stderr.contains(&target), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(15));
}

/// k6 cannot be installed here: check the script parses, targets
/// endpoints that exist, and runs every variant by asking the stack
/// (`/api/variants`) rather than keeping a list of its own.
#[test]
fn k6_script_parses_and_targets_existing_endpoints() {
    let script_path = concat!(env!("CARGO_MANIFEST_DIR"), "/loadtest/k6/flash-sale.js");
    let script = std::fs::read_to_string(script_path).unwrap();

    assert!(
        script.contains("const asked = __ENV.VARIANTS ? __ENV.VARIANTS.split(',') : known;"),
        "every variant of /api/variants unless VARIANTS picks some"
    );
    assert!(
        !script.contains("__ENV.VARIANTS ||"),
        "a default list of variants of its own"
    );

    let mut paths: Vec<&str> = script
        .split("${BASE}")
        .skip(1)
        .map(|rest| rest.split(['?', '`', '$']).next().unwrap())
        .collect();
    paths.sort_unstable();
    paths.dedup();
    assert_eq!(
        paths,
        [
            "/api/admin/reset",
            "/api/state",
            "/api/variants",
            "/deductStock/"
        ]
    );

    // k6 scripts are ES modules.
    crate::helpers::node_check(std::path::Path::new(script_path), true);
}

/// A target that accepts connections but never answers (a frozen process):
/// every request times out, counted as such, and the run still ends.
#[tokio::test]
async fn a_silent_target_times_out_per_request() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = format!("http://{}", listener.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket); // keep it open, say nothing
        }
    });
    let started = std::time::Instant::now();
    let output = load(
        &target,
        "t",
        &[
            "--path",
            "/healthz",
            "--requests",
            "4",
            "-c",
            "2",
            "--timeout",
            "300ms",
        ],
    )
    .await;
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("4 requests"), "{stdout}");
    assert!(stdout.contains("timeout 4 "), "{stdout}");
    assert!(started.elapsed() < Duration::from_secs(10));
    held.abort();
}
