//! `stocklock load`, run as a user runs it, against a real stack.

use std::process::Output;
use std::time::Duration;

use serde_json::Value;
use stocklock::variants::Variant;
use tokio::process::Command;

use crate::helpers::Stack;

/// Runs `stocklock load ARGS` against `target` (bounded in time).
async fn load(target: &str, token: &str, args: &[&str]) -> Output {
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
async fn all_variants_counts_agree_with_the_ledger_and_the_json_has_every_field() {
    let stack = Stack::start_with(2, None, crate::helpers::LOCK_STORES).await;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let history = dir.path().join("history.jsonl");
    let output = load(
        &stack.url,
        &stack.token,
        &[
            "--variant",
            "all",
            "--stock",
            "50",
            "--requests",
            "400",
            "--concurrency",
            "64",
            "--work-ms",
            "2",
            "--json",
            json.to_str().unwrap(),
            "--history",
            history.to_str().unwrap(),
            "--check",
        ],
    )
    .await;
    assert!(
        output.status.success(),
        "the matrix's own expectations hold: --check passes"
    );
    let table = String::from_utf8_lossy(&output.stdout);
    for variant in Variant::ALL {
        assert!(
            table.lines().any(|l| l.starts_with(variant.name())),
            "no row for {variant}"
        );
    }

    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), Variant::ALL.len());
    for run in runs {
        let variant = run["variant"].as_str().unwrap();
        for field in [
            "variant",
            "sku",
            "requests",
            "sold",
            "sold_out",
            "busy",
            "errors",
            "rps",
            "latency_ms",
            "remaining",
            "oversold",
            "duplicates",
            "per_instance",
            "verdict",
            "expected",
        ] {
            assert!(!run[field].is_null(), "{variant}: no {field}");
        }
        for field in ["p50", "p90", "p99", "max"] {
            assert!(
                run["latency_ms"][field].as_f64().unwrap() > 0.0,
                "{variant}: latency {field}"
            );
        }
        for field in ["connect", "timeout", "5xx", "other"] {
            assert_eq!(run["errors"][field], 0, "{variant}: errors {field}");
        }
        assert_eq!(run["requests"], 400);
        assert_eq!(run["sku"], variant, "each variant sells its own SKU");
        assert!(run.get("disagreement").is_none(), "{variant}: {run}");

        // The generator's 200s are the ledger's sales.
        let state = stack.state(variant).await;
        assert_eq!(run["sold"].as_i64().unwrap(), state.sold, "{variant}");
        assert_eq!(
            run["oversold"].as_i64().unwrap(),
            state.oversold,
            "{variant}"
        );
        assert_eq!(
            run["sold"].as_u64().unwrap()
                + run["sold_out"].as_u64().unwrap()
                + run["busy"].as_u64().unwrap(),
            400
        );
        assert_eq!(
            run["per_instance"].as_object().unwrap().len(),
            2,
            "{variant}: {}",
            run["per_instance"]
        );

        assert_eq!(run["unknown"], 0, "{variant}: nothing went unanswered");
        let verdict = run["verdict"].as_str().unwrap();
        match variant {
            "none" | "local-mutex" => {
                assert!(verdict.starts_with("OVERSOLD "), "{variant}: {verdict}")
            }
            // Fail-fast locks turn buyers away while stock is left: the
            // under-selling their own teaching text announces.
            // `pg-optimistic` gives up per buyer, not for the stock: later
            // buyers may sell what an earlier one gave up on, so it may end
            // sold out, its refusals counted all the same.
            "pg-optimistic" if state.remaining == 0 => {
                assert!(run["busy"].as_i64().unwrap() > 0, "{variant}: {run}");
                assert_eq!(verdict, "SAFE", "{variant}");
            }
            _ if variant
                .parse::<Variant>()
                .unwrap()
                .info()
                .undersells
                .is_some() =>
            {
                let refused = run["busy"].as_i64().unwrap();
                assert!(state.remaining > 0 && refused > 0, "{variant}: {state:?}");
                assert_eq!(
                    verdict,
                    format!(
                        "SAFE, unsold {} while {refused} buyers were refused",
                        state.remaining
                    ),
                    "{variant}"
                );
                assert_eq!(run["unsold"]["left"], state.remaining, "{variant}");
                assert_eq!(run["unsold"]["refused"], refused, "{variant}");
            }
            _ => {
                assert_eq!(verdict, "SAFE", "{variant}");
                assert!(run.get("unsold").is_none(), "{variant}: {run}");
            }
        }
        let expected = Variant::ALL
            .iter()
            .find(|v| v.name() == variant)
            .unwrap()
            .info()
            .expected
            .two_instances;
        assert_eq!(run["expected"], expected.as_str());

        // The independent judge, from what the clients were told alone:
        // the oversellers' answers fit no stock, every other run's do.
        let judged = &run["history"];
        assert_eq!(judged["ops"], 401, "{variant}: 400 answers and the books");
        let want = match variant {
            "none" | "local-mutex" => "unsafe",
            _ => "linearizable",
        };
        assert_eq!(judged["verdict"], want, "{variant}: {judged}");
        assert!(judged.get("disagreement").is_none(), "{variant}: {judged}");
    }
    stack.stop().await;

    // The file it wrote is judged the same again by `history check`, and
    // the failed SKUs are drawn beside the JSON.
    let out = dir.path().join("verdicts.json");
    let check = std::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
        .args(["history", "check"])
        .arg(&history)
        .arg("--json")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(2), "{check:?}");
    let verdicts: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let skus = verdicts["skus"].as_array().unwrap();
    assert_eq!(skus.len(), Variant::ALL.len());
    for sku in skus {
        let oversells = matches!(sku["sku"].as_str().unwrap(), "none" | "local-mutex");
        let want = if oversells { "unsafe" } else { "linearizable" };
        assert_eq!(sku["verdict"], want, "{sku}");
    }
    let picture = std::fs::read_to_string(out.with_extension("html")).unwrap();
    assert!(picture.contains("none — unsafe"), "{picture}");
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
