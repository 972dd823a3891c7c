//! The resolved compose file: every service, the instances knowing every
//! store by its service name, pinned images, ports on loopback only.

use super::*;

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
