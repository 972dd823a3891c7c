//! No well-known secret: compose refuses to start without an admin token
//! or a Grafana password, and the instances refuse the old placeholder.

use super::*;

/// No well-known admin token: without STOCKLOCK_ADMIN_TOKEN compose refuses
/// to start the stack, and says what to set.
#[test]
fn compose_refuses_to_start_without_an_admin_token() {
    let Some(refused) = compose_with_token(&["config", "-q"], None) else {
        skipped(
            "compose_refuses_to_start_without_an_admin_token: docker-compose is not installed \
             (apt-get install docker-compose)",
        );
        return;
    };
    assert!(!refused.status.success(), "compose started without a token");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("set STOCKLOCK_ADMIN_TOKEN to a secret of your own"),
        "{said}"
    );
    // With one, the same file is valid.
    let given = compose_with_token(&["config", "-q"], Some(TOKEN)).unwrap();
    assert!(
        given.status.success(),
        "{}",
        String::from_utf8_lossy(&given.stderr)
    );
    // The file itself names no default, the old `change-me` least of all.
    let file = read(&project_file("docker-compose.yml"));
    assert!(!file.contains("STOCKLOCK_ADMIN_TOKEN:-"), "a default token");
    assert!(
        file.lines()
            .filter(|line| !line.trim_start().starts_with('#'))
            .all(|line| !line.contains("change-me")),
        "change-me is still in docker-compose.yml"
    );
}

/// No well-known Grafana admin password (it was `admin`): without
/// GRAFANA_ADMIN_PASSWORD compose refuses to start, and says what to set.
#[test]
fn compose_refuses_to_start_without_a_grafana_password() {
    // The file itself names no default.
    let file = read(&project_file("docker-compose.yml"));
    assert!(
        !file.contains("GRAFANA_ADMIN_PASSWORD:-"),
        "a default Grafana admin password"
    );
    let Some(refused) = compose_with_secrets(&["config", "-q"], Some(TOKEN), None) else {
        skipped(
            "compose_refuses_to_start_without_a_grafana_password: docker-compose is not installed \
             (apt-get install docker-compose)",
        );
        return;
    };
    assert!(
        !refused.status.success(),
        "compose started without a Grafana password"
    );
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("set GRAFANA_ADMIN_PASSWORD"), "{said}");
    let full = compose(&["config"]).unwrap();
    let config = String::from_utf8_lossy(&full.stdout);
    let grafana = service_block(&config, "grafana").expect("a grafana service");
    assert_eq!(
        environment_value(&grafana, "GF_SECURITY_ADMIN_PASSWORD").as_deref(),
        Some(GRAFANA_PASSWORD)
    );
}

/// The instances refuse the placeholder older compose files defaulted to,
/// before they touch anything, and say what to do instead.
#[test]
fn serve_refuses_the_placeholder_token() {
    let output = Command::new(env!("CARGO_BIN_EXE_stocklock"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--redis-url",
            "redis://127.0.0.1:9",
        ])
        .env("STOCKLOCK_ADMIN_TOKEN", "change-me")
        .stdin(Stdio::null())
        .output()
        .expect("run stocklock serve");
    assert!(!output.status.success(), "serve started with change-me");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("placeholder") && said.contains("openssl rand -hex 16"),
        "{said}"
    );
}
