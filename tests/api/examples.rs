//! The lock library's examples (`crates/stocklock-lock/examples/`), run as a user runs them,
//! against real servers (Redis, etcd, ZooKeeper): each checks what it
//! shows and exits 1 when the lock does not behave as described. `cargo
//! test` builds them first; a run filtered to this binary may not have
//! (then `cargo build --workspace --examples`).

use std::path::PathBuf;
use std::process::Output;

use crate::helpers;

/// An example's binary, next to the package's own (`target/debug/examples`).
fn example(name: &str) -> Option<PathBuf> {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_stocklock"));
    let path = bin.parent()?.join("examples").join(name);
    path.exists().then_some(path)
}

async fn run(name: &str, args: &[&str]) -> Option<Output> {
    let Some(path) = example(name) else {
        helpers::missing_tool(&format!(
            "the example {name} is not built (cargo test --workspace builds the examples; cargo build --workspace --examples)"
        ));
        return None;
    };
    let output = tokio::process::Command::new(&path)
        .args(args)
        .env_remove("STOCKLOCK_REDIS_URL")
        .env_remove("STOCKLOCK_ETCD_ENDPOINTS")
        .env_remove("STOCKLOCK_ZOOKEEPER")
        .kill_on_drop(true)
        .output()
        .await
        .expect("run the example");
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "example {name} failed ({}):\n{said}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    // Shown with --nocapture: what the example printed.
    eprintln!("example {name}:\n{said}");
    Some(output)
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn every_lock_example_runs_and_shows_what_it_says() {
    let redis = helpers::redis().await;
    let url = redis.url();
    let Some(lease) = run("lease", &["--redis-url", &url]).await else {
        return;
    };
    let said = stdout(&lease);
    assert!(said.contains("bob holds it"), "{said}");
    assert!(said.contains("alice's lease ran out mid-work"), "{said}");

    let watchdog = run("watchdog", &["--redis-url", &url]).await.unwrap();
    let said = stdout(&watchdog);
    assert!(said.contains("still held"), "{said}");
    assert!(said.contains("lease is lost"), "{said}");

    // Twice: the store remembers the newest token across runs, and the
    // second run's tokens are newer still.
    for _ in 0..2 {
        let fenced = run("fenced", &["--redis-url", &url]).await.unwrap();
        let said = stdout(&fenced);
        assert!(said.contains("late write was refused"), "{said}");
    }

    let mut servers = Vec::new();
    for _ in 0..5 {
        servers.push(helpers::redis().await);
    }
    let nodes: Vec<String> = servers.iter().map(|s| s.url()).collect();
    let redlock = run("redlock", &["--nodes", &nodes.join(",")])
        .await
        .unwrap();
    let said = stdout(&redlock);
    assert!(said.contains("majority of 5 nodes (quorum 3)"), "{said}");
    assert!(said.contains("released on 5 nodes"), "{said}");
}

#[tokio::test]
async fn the_etcd_example_runs_and_shows_what_it_says() {
    let Some(mut etcd) = crate::etcd::one_member().await else {
        return;
    };
    let endpoints = etcd.urls().join(",");
    let Some(output) = run("etcd", &["--etcd-endpoints", &endpoints]).await else {
        return;
    };
    let said = stdout(&output);
    assert!(said.contains("keep-alives, still held"), "{said}");
    assert!(said.contains("after alice's release"), "{said}");
    assert!(said.contains("etcd freed it with his lease"), "{said}");
    etcd.stop().await;
}

#[tokio::test]
async fn the_zookeeper_example_runs_and_shows_what_it_says() {
    let Some(servers) = crate::zookeeper::Servers::start(1).await else {
        return;
    };
    let connect = servers.connect_string();
    let Some(output) = run("zookeeper", &["--zookeeper", &connect]).await else {
        return;
    };
    let said = stdout(&output);
    assert!(said.contains("the recipe is not reentrant"), "{said}");
    assert!(said.contains("after alice's release"), "{said}");
    assert!(said.contains("his session closed"), "{said}");
    servers.stop().await;
}
