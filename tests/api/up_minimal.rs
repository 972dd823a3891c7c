//! `scripts/up.sh --minimal`: installs only redis-server and nginx (deps.sh
//! with no extras) and runs `stocklock up` without the stores that need
//! more; the variants and orders without their store say which one is
//! missing and how to add it.

use std::path::Path;
use std::process::Command;

use stocklock::variants::Variant;

use crate::helpers::Stack;

/// What `up.sh --minimal` adds to `stocklock up`'s arguments; the shell
/// test checks up.sh passes exactly these.
const MINIMAL: &[&str] = &["--etcd", "0", "--zookeeper", "0", "--orders", "off"];

/// Runs a copy of up.sh in a tree where deps.sh, cargo and the release
/// binary are fakes that record their arguments; (deps.sh's, stocklock's).
fn run_up_sh(args: &[&str]) -> (String, String) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for sub in ["scripts", "target/release", "bin"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/up.sh");
    std::fs::copy(&script, root.join("scripts/up.sh")).unwrap();
    let fakes = [
        ("scripts/deps.sh", "deps"),
        ("target/release/stocklock", "stocklock"),
        ("bin/cargo", "cargo"),
    ];
    for (path, record) in fakes {
        let body = format!(
            "#!/usr/bin/env bash\necho \"$*\" > \"{}/{record}.args\"\n",
            root.display()
        );
        std::fs::write(root.join(path), body).unwrap();
        std::fs::set_permissions(root.join(path), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!(
        "{}:{}",
        root.join("bin").display(),
        std::env::var("PATH").unwrap()
    );
    let output = Command::new("bash")
        .arg(root.join("scripts/up.sh"))
        .args(args)
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "up.sh failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let read = |name: &str| {
        std::fs::read_to_string(root.join(format!("{name}.args")))
            .unwrap_or_else(|_| panic!("up.sh did not run {name}"))
            .trim()
            .to_owned()
    };
    assert!(root.join("cargo.args").exists(), "up.sh did not build");
    (read("deps"), read("stocklock"))
}

#[test]
fn up_sh_minimal_installs_no_extras_and_starts_up_without_their_stores() {
    let (deps, up) = run_up_sh(&["--minimal", "--port", "9090"]);
    assert_eq!(deps, "", "deps.sh was given extras");
    assert_eq!(up, format!("up {} --port 9090", MINIMAL.join(" ")));

    let (deps, up) = run_up_sh(&["--port", "9090"]);
    assert!(
        deps.contains("etcd-server") && deps.contains("postgresql"),
        "{deps}"
    );
    assert_eq!(up, "up --port 9090");
}

#[tokio::test]
async fn a_minimal_stack_serves_and_names_each_missing_store() {
    let stack = Stack::start_with(2, None, MINIMAL).await;
    let http = stack.http();
    // Redlock's nodes are redis-servers: they need nothing more.
    for variant in ["lua", "redlock"] {
        let url = format!("{}/deductStock/{variant}?sku={variant}", stack.url);
        let answer = http.get(url).send().await.unwrap();
        assert_eq!(answer.status(), 200, "{variant}");
    }

    // What the dashboard's card shows for each: the answer's detail. The
    // database's variants name the flag that gives an instance PostgreSQL.
    let mut missing = vec![
        ("/deductStock/etcd?sku=etcd".to_owned(), "--etcd"),
        (
            "/deductStock/zookeeper?sku=zookeeper".to_owned(),
            "--zookeeper",
        ),
        ("/api/orders?sku=lua".to_owned(), "--orders"),
    ];
    for variant in Variant::ALL.into_iter().filter(|v| v.stock_in_postgres()) {
        missing.push((
            format!("/deductStock/{variant}?sku={variant}"),
            "--postgres-url",
        ));
    }
    for (path, flag) in missing {
        let answer = http
            .get(format!("{}{path}", stack.url))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 503, "{path}");
        let body: serde_json::Value = answer.json().await.unwrap();
        assert_eq!(body["error"], "not_configured", "{path}: {body}");
        let detail = body["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains(flag),
            "{path} does not name {flag}: {detail}"
        );
        if flag != "--orders" {
            assert!(
                detail.contains("scripts/up.sh without --minimal"),
                "{path} does not say how to add it: {detail}"
            );
        }
    }
    stack.stop().await;
}
