//! docker-compose.yml, read by `docker-compose config` (offline): a valid
//! file with every service, the instances knowing every store by its
//! service name, pinned images and loopback-only ports.

use std::process::{Command, Output, Stdio};

use super::*;

/// How to run compose: `docker-compose` (v1, or v2 installed standalone),
/// else the `docker compose` plugin. `config` needs no engine in either.
fn compose_command() -> Option<Command> {
    if succeeds("docker-compose", &["version"]) {
        return Some(Command::new("docker-compose"));
    }
    if succeeds("docker", &["compose", "version"]) {
        let mut command = Command::new("docker");
        command.arg("compose");
        return Some(command);
    }
    None
}

/// The admin token the compose tests give: compose refuses to start without one.
const TOKEN: &str = "a-token-of-the-tests";

/// Grafana's admin password the compose tests give: no default either.
const GRAFANA_PASSWORD: &str = "a-grafana-password-of-the-tests";

fn compose(args: &[&str]) -> Option<Output> {
    compose_with_token(args, Some(TOKEN))
}

/// `compose args` with STOCKLOCK_ADMIN_TOKEN set to `token` (or unset).
fn compose_with_token(args: &[&str], token: Option<&str>) -> Option<Output> {
    compose_with_secrets(args, token, Some(GRAFANA_PASSWORD))
}

/// `compose args` with STOCKLOCK_ADMIN_TOKEN and GRAFANA_ADMIN_PASSWORD set
/// (or unset).
fn compose_with_secrets(
    args: &[&str],
    token: Option<&str>,
    grafana: Option<&str>,
) -> Option<Output> {
    let file = project_file("docker-compose.yml");
    let mut command = compose_command()?;
    command
        .arg("-f")
        .arg(&file)
        .args(args)
        .env_remove("STOCKLOCK_ADMIN_TOKEN")
        .env_remove("GRAFANA_ADMIN_PASSWORD")
        .stdin(Stdio::null());
    if let Some(token) = token {
        command.env("STOCKLOCK_ADMIN_TOKEN", token);
    }
    if let Some(password) = grafana {
        command.env("GRAFANA_ADMIN_PASSWORD", password);
    }
    Some(command.output().expect("run compose"))
}

/// The lines of one service in compose YAML (`config` output or the file
/// itself): from `  name:` under `services:` to the next top-level key or
/// service.
pub(super) fn service_block(yaml: &str, name: &str) -> Option<String> {
    let header = format!("  {name}:");
    let mut in_services = false;
    let mut lines = yaml.lines();
    for line in lines.by_ref() {
        if !line.starts_with(' ') && !line.starts_with('#') && !line.is_empty() {
            in_services = line.trim_end() == "services:";
        } else if in_services && line.trim_end() == header {
            let block: Vec<&str> = lines
                .take_while(|line| {
                    let indent = line.len() - line.trim_start().len();
                    line.trim().is_empty() || line.trim_start().starts_with('#') || indent > 2
                })
                .collect();
            return Some(block.join("\n"));
        }
    }
    None
}

/// Whether a service block's `ports:` publishes `port`, in the short syntax
/// (`- "8080:8080"`) or in the long one `config` prints (`published: 8080`;
/// v2 quotes it).
fn publishes(block: &str, port: u16) -> bool {
    let port = port.to_string();
    let indent = |line: &str| line.len() - line.trim_start().len();
    let mut lines = block.lines().skip_while(|line| line.trim() != "ports:");
    let Some(ports) = lines.next() else {
        return false;
    };
    lines
        .take_while(|line| indent(line) > indent(ports) || line.trim_start().starts_with("- "))
        .map(|line| {
            line.trim()
                .trim_start_matches("- ")
                .trim_matches(['"', '\''])
        })
        .any(|item| match item.strip_prefix("published:") {
            Some(value) => value.trim().trim_matches(['"', '\'']) == port,
            None => item.split(':').rev().nth(1) == Some(port.as_str()),
        })
}

/// The value of `name` in a service block's `environment:`, mapping
/// (`NAME: "value"`) or list (`- NAME=value`) form, quotes removed.
pub(super) fn environment_value(block: &str, name: &str) -> Option<String> {
    block.lines().map(str::trim).find_map(|line| {
        let value = line
            .strip_prefix(&format!("{name}:"))
            .or_else(|| line.strip_prefix(&format!("- {name}=")))?;
        let value = value.trim();
        let unquoted = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(value);
        Some(unquoted.to_owned())
    })
}

#[test]
fn compose_file_is_valid() {
    let Some(quiet) = compose(&["config", "-q"]) else {
        skipped(
            "compose_file_is_valid: docker-compose is not installed \
             (apt-get install docker-compose)",
        );
        return;
    };
    assert!(
        quiet.status.success(),
        "compose config -q failed ({}):\n{}",
        quiet.status,
        String::from_utf8_lossy(&quiet.stderr)
    );

    let full = compose(&["config"]).expect("compose ran a moment ago");
    assert!(
        full.status.success(),
        "compose config failed ({}):\n{}",
        full.status,
        String::from_utf8_lossy(&full.stderr)
    );
    let config = String::from_utf8_lossy(&full.stdout);
    for service in [
        "redis",
        "app-a",
        "app-b",
        "nginx",
        "redlock-1",
        "redlock-2",
        "redlock-3",
        "redlock-4",
        "redlock-5",
        "etcd-1",
        "etcd-2",
        "etcd-3",
        "zookeeper",
        "redis-replica",
        "sentinel-1",
        "sentinel-2",
        "sentinel-3",
        "prometheus",
        "grafana",
        "postgres",
    ] {
        assert!(
            service_block(&config, service).is_some(),
            "no service {service:?} in the resolved compose file:\n{config}"
        );
    }
    // Both instances know the five Redlock nodes by their service names.
    for app in ["app-a", "app-b"] {
        let block = service_block(&config, app).unwrap();
        let nodes = environment_value(&block, "STOCKLOCK_REDLOCK_NODES")
            .unwrap_or_else(|| panic!("{app} has no STOCKLOCK_REDLOCK_NODES:\n{block}"));
        for i in 1..=5 {
            assert!(
                nodes.contains(&format!("redis://redlock-{i}:6379")),
                "{nodes}"
            );
        }
        // ... and the etcd members and ZooKeeper by theirs.
        let etcd = environment_value(&block, "STOCKLOCK_ETCD_ENDPOINTS")
            .unwrap_or_else(|| panic!("{app} has no STOCKLOCK_ETCD_ENDPOINTS:\n{block}"));
        for i in 1..=3 {
            assert!(etcd.contains(&format!("http://etcd-{i}:2379")), "{etcd}");
        }
        assert_eq!(
            environment_value(&block, "STOCKLOCK_ZOOKEEPER").as_deref(),
            Some("zookeeper:2181"),
            "{block}"
        );
        // ... and the orders' PostgreSQL by its, once it is healthy.
        let postgres = environment_value(&block, "STOCKLOCK_POSTGRES_URL")
            .unwrap_or_else(|| panic!("{app} has no STOCKLOCK_POSTGRES_URL:\n{block}"));
        assert!(
            postgres.starts_with("postgresql://stocklock")
                && postgres.ends_with("@postgres:5432/stocklock"),
            "{postgres}"
        );
        let waits = block
            .lines()
            .map(str::trim)
            .skip_while(|line| *line != "postgres:")
            .nth(1)
            .is_some_and(|line| line == "condition: service_healthy");
        assert!(
            waits,
            "{app} does not wait for a healthy postgres:\n{block}"
        );
        // ... and find the master through the three Sentinels.
        assert_eq!(
            environment_value(&block, "STOCKLOCK_SENTINEL").as_deref(),
            Some("sentinel-1:26379,sentinel-2:26379,sentinel-3:26379"),
            "{block}"
        );
    }
    // PostgreSQL: a pinned image (its versions since 10 are x.y: 15.10 is
    // a release, 15 a moving tag), a health check, no port on the host.
    let postgres = service_block(&config, "postgres").unwrap();
    assert!(
        pinned(&postgres, 2),
        "postgres's image is not pinned to a release x.y:\n{postgres}"
    );
    assert!(
        postgres.contains("healthcheck:") && postgres.contains("pg_isready"),
        "postgres has no pg_isready health check:\n{postgres}"
    );
    assert!(
        !postgres.contains("ports:"),
        "postgres is published:\n{postgres}"
    );
    // nginx: on the host's loopback only, since it lets /api/admin/
    // through from the Docker network.
    let nginx = service_block(&config, "nginx").unwrap();
    assert!(
        publishes(&nginx, 8080),
        "the nginx service does not publish port 8080:\n{nginx}"
    );
    assert!(
        publishes_only_on_loopback(&nginx),
        "nginx publishes port 8080 beyond 127.0.0.1:\n{nginx}"
    );
    // The instances: the token given, chaos mode on (the dashboard's fault
    // buttons), the dashboard's runs sent through nginx.
    for app in ["app-a", "app-b"] {
        let block = service_block(&config, app).unwrap();
        assert_eq!(
            environment_value(&block, "STOCKLOCK_ADMIN_TOKEN").as_deref(),
            Some(TOKEN),
            "{block}"
        );
        assert_eq!(
            environment_value(&block, "STOCKLOCK_PUBLIC_URL").as_deref(),
            Some("http://nginx:8080"),
            "{block}"
        );
        assert!(
            block.lines().any(|line| line.trim() == "- --chaos"),
            "{app} does not run in chaos mode:\n{block}"
        );
    }
    // Prometheus and Grafana: pinned images, published on loopback only
    // (neither asks for a password to read).
    for (service, port) in [("prometheus", 9090), ("grafana", 3001)] {
        let block = service_block(&config, service).unwrap();
        assert!(
            publishes(&block, port),
            "{service} does not publish port {port}:\n{block}"
        );
        assert!(
            publishes_only_on_loopback(&block),
            "{service} publishes a port beyond 127.0.0.1:\n{block}"
        );
        assert!(
            pinned(&block, 3),
            "{service}'s image is not pinned to a version x.y.z:\n{block}"
        );
    }
}

/// Whether a service block's image is pinned to a version of `parts`
/// numbers (`x.y.z` for 3), not a moving tag.
fn pinned(block: &str, parts: usize) -> bool {
    let image = block
        .lines()
        .find_map(|line| line.trim().strip_prefix("image:"))
        .unwrap_or_default()
        .trim();
    let tag = image.rsplit_once(':').map(|(_, tag)| tag).unwrap_or("");
    let numbers: Vec<&str> = tag.trim_start_matches('v').split('.').collect();
    numbers.len() == parts
        && numbers
            .iter()
            .all(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// Whether every port a service block publishes is bound to 127.0.0.1
/// (short syntax `127.0.0.1:host:container`, or `host_ip: 127.0.0.1`).
fn publishes_only_on_loopback(block: &str) -> bool {
    let indent = |line: &str| line.len() - line.trim_start().len();
    let mut lines = block.lines().skip_while(|line| line.trim() != "ports:");
    let Some(ports) = lines.next() else {
        return true;
    };
    let entries: Vec<&str> = lines
        .take_while(|line| indent(line) > indent(ports) || line.trim_start().starts_with("- "))
        .map(str::trim)
        .collect();
    let long_syntax = entries.iter().any(|line| line.contains("published:"));
    if long_syntax {
        let published = entries.iter().filter(|l| l.contains("published:")).count();
        let loopback = entries
            .iter()
            .filter(|l| l.trim_start_matches("- ").trim() == "host_ip: 127.0.0.1")
            .count();
        return published == loopback;
    }
    entries.iter().all(|entry| {
        entry
            .trim_start_matches("- ")
            .trim_matches(['"', '\''])
            .starts_with("127.0.0.1:")
    })
}

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
