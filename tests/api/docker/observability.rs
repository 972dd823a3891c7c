//! Prometheus and Grafana as docker-compose runs them: the scrape
//! config and the provisioned dashboard.

use super::*;

/// The value of the first `key: value` line of a YAML text (comments
/// skipped, quotes removed): enough for the flat files shipped here.
fn yaml_value(yaml: &str, key: &str) -> Option<String> {
    yaml.lines()
        .map(str::trim)
        .filter(|line| !line.starts_with('#'))
        .map(|line| line.trim_start_matches("- "))
        .find_map(|line| line.strip_prefix(&format!("{key}:")))
        .map(|value| value.trim().trim_matches(['"', '\'']).to_owned())
}

/// The `- ./host:/container[:ro]` volumes of a service block, as
/// (host path, container path).
fn volumes(block: &str) -> Vec<(String, String)> {
    let indent = |line: &str| line.len() - line.trim_start().len();
    let mut lines = block.lines().skip_while(|line| line.trim() != "volumes:");
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    lines
        .take_while(|line| indent(line) > indent(header) || line.trim_start().starts_with("- "))
        .filter_map(|line| {
            let entry = line.trim().strip_prefix("- ")?.trim_matches(['"', '\'']);
            let mut parts = entry.split(':');
            Some((parts.next()?.to_owned(), parts.next()?.to_owned()))
        })
        .collect()
}

/// Where a service mounts `host` (a path relative to the project), if it does.
fn mounted_at(block: &str, host: &str) -> Option<String> {
    volumes(block)
        .into_iter()
        .find(|(from, _)| from.trim_start_matches("./").trim_end_matches('/') == host)
        .map(|(_, to)| to)
}

/// `promtool ARGS`: its output, or `None` (a visible skip, a failure under
/// `CI=true`) when Prometheus's promtool is not installed.
fn promtool(test: &str, args: &[&std::ffi::OsStr]) -> Option<Output> {
    let Some(promtool) = stocklock::os::find_program("promtool") else {
        skipped(&format!(
            "{test}: promtool is not installed (apt-get install prometheus)"
        ));
        return None;
    };
    Some(
        Command::new(promtool)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run promtool"),
    )
}

#[test]
fn prometheus_scrapes_every_instance_nginx_fronts() {
    let compose_text = read(&project_file("docker-compose.yml"));
    let config_path = project_file("prometheus/prometheus.yml");
    let config = read(&config_path);

    // Its targets are exactly the servers nginx balances over: every
    // instance, by its compose service name and port, and nothing else.
    let mut targets: Vec<String> = config
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .filter_map(|line| yaml_value(line, "targets"))
        .flat_map(|list| {
            let items = list
                .strip_prefix('[')
                .and_then(|l| l.strip_suffix(']'))
                .unwrap_or_else(|| panic!("targets {list:?} is not a [flow, list]"))
                .to_owned();
            items
                .split(',')
                .map(|t| t.trim().trim_matches(['"', '\'']).to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    targets.sort();
    let nginx = service_block(&compose_text, "nginx").expect("an nginx service");
    let upstreams = environment_value(&nginx, "STOCKLOCK_UPSTREAMS").expect("nginx's upstreams");
    let mut instances: Vec<String> = upstreams
        .split(';')
        .filter_map(|directive| {
            let mut words = directive.split_whitespace();
            (words.next()? == "server").then(|| words.next().map(str::to_owned))?
        })
        .collect();
    instances.sort();
    assert!(instances.len() >= 2, "nginx fronts {instances:?}");
    assert_eq!(
        targets, instances,
        "prometheus/prometheus.yml must scrape exactly the instances nginx fronts"
    );
    for target in &targets {
        let (service, port) = target.split_once(':').expect("host:port");
        let block = service_block(&compose_text, service)
            .unwrap_or_else(|| panic!("target {target}: no compose service {service:?}"));
        assert!(
            block.contains(&format!("0.0.0.0:{port}")),
            "{service} does not listen on port {port}:\n{block}"
        );
    }
    // The instances' own `instance` label (a, b) is kept.
    assert_eq!(yaml_value(&config, "honor_labels").as_deref(), Some("true"));

    // The prometheus service runs this very file.
    let prometheus = service_block(&compose_text, "prometheus").expect("a prometheus service");
    let mounted = mounted_at(&prometheus, "prometheus/prometheus.yml")
        .unwrap_or_else(|| panic!("prometheus does not mount the file:\n{prometheus}"));
    assert!(
        prometheus.contains(&format!("--config.file={mounted}")),
        "prometheus does not read {mounted}:\n{prometheus}"
    );

    let Some(checked) = promtool(
        "prometheus_scrapes_every_instance_nginx_fronts",
        &["check".as_ref(), "config".as_ref(), config_path.as_os_str()],
    ) else {
        return;
    };
    assert!(
        checked.status.success(),
        "promtool check config:\n{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
}

/// The metric names a PromQL expression selects: identifiers (outside
/// quoted strings) right before a `{`.
fn selected_metrics(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in expr.chars() {
        if c == '"' {
            quoted = !quoted;
            current.clear();
        } else if quoted {
        } else if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            current.push(c);
        } else {
            if c == '{' && !current.is_empty() {
                names.push(current.clone());
            }
            current.clear();
        }
    }
    names
}

/// Every query of the shipped Grafana dashboard, as written there (with
/// Grafana's variables).
pub(crate) fn dashboard_queries() -> Vec<String> {
    let text = read(&project_file("grafana/dashboards/stocklock.json"));
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut queries = Vec::new();
    panel_queries(
        dashboard["panels"].as_array().expect("panels"),
        &mut queries,
    );
    queries
}

/// A dashboard query as Prometheus receives it: Grafana's variables
/// replaced by what they stand for with every option selected.
pub(crate) fn concrete_query(query: &str) -> String {
    let concrete = query
        .replace("$__rate_interval", "1m")
        .replace("$variant", ".*")
        .replace("$instance", ".*");
    assert!(!concrete.contains('$'), "{query}: an unknown variable");
    concrete
}

/// Every `expr` of a Grafana dashboard's panels (rows' panels included).
fn panel_queries(panels: &[serde_json::Value], out: &mut Vec<String>) {
    for panel in panels {
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                out.push(expr.to_owned());
            }
        }
        if let Some(inner) = panel["panels"].as_array() {
            panel_queries(inner, out);
        }
    }
}

/// Every datasource uid a dashboard names (panels, targets, variables).
fn datasource_uids(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            if let Some(uid) = map.get("datasource").and_then(|d| d["uid"].as_str()) {
                out.push(uid.to_owned());
            }
            map.values().for_each(|v| datasource_uids(v, out));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| datasource_uids(v, out)),
        _ => {}
    }
}

#[test]
fn grafana_is_provisioned_with_a_dashboard_of_exported_metrics() {
    let compose_text = read(&project_file("docker-compose.yml"));
    let grafana = service_block(&compose_text, "grafana").expect("a grafana service");
    let datasources = read(&project_file(
        "grafana/provisioning/datasources/prometheus.yml",
    ));
    let providers = read(&project_file(
        "grafana/provisioning/dashboards/stocklock.yml",
    ));

    // Grafana reads both provisioning directories where it looks for them,
    // and the dashboards where the provider says they are.
    for kind in ["datasources", "dashboards"] {
        assert_eq!(
            mounted_at(&grafana, &format!("grafana/provisioning/{kind}")).as_deref(),
            Some(format!("/etc/grafana/provisioning/{kind}").as_str()),
            "grafana does not mount its {kind} provisioning:\n{grafana}"
        );
    }
    let dashboards_dir = yaml_value(&providers, "path").expect("a provider path");
    assert_eq!(
        mounted_at(&grafana, "grafana/dashboards").as_deref(),
        Some(dashboards_dir.as_str()),
        "the provider reads {dashboards_dir}, not where grafana/dashboards is mounted:\n{grafana}"
    );

    // The datasource is the compose's Prometheus, on its port.
    let url = yaml_value(&datasources, "url").expect("a datasource url");
    let (host, port) = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split_once(':'))
        .unwrap_or_else(|| panic!("datasource url {url:?} is not http://host:port"));
    let prometheus = service_block(&compose_text, "prometheus")
        .unwrap_or_else(|| panic!("the datasource's host {host:?} is no compose service"));
    assert!(
        prometheus.contains(&format!(":{port}\"")),
        "prometheus does not serve port {port}:\n{prometheus}"
    );
    let uid = yaml_value(&datasources, "uid").expect("a datasource uid");

    // The dashboard: JSON, on that datasource, querying only what the
    // instances export (and Prometheus's own `up`), every metric shown.
    let text = read(&project_file("grafana/dashboards/stocklock.json"));
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    assert!(dashboard["uid"].is_string() && dashboard["title"].is_string());
    let mut uids = Vec::new();
    datasource_uids(&dashboard, &mut uids);
    assert!(!uids.is_empty());
    assert!(
        uids.iter().all(|u| *u == uid),
        "the dashboard names datasources {uids:?}; provisioned is {uid:?}"
    );
    let queries = dashboard_queries();
    assert!(queries.len() >= 10, "{queries:?}");
    let exported = stocklock::metrics::series_names();
    let mut used = std::collections::BTreeSet::new();
    for query in &queries {
        let selected = selected_metrics(query);
        assert!(!selected.is_empty(), "{query}: selects no metric");
        for name in selected {
            assert!(
                exported.contains(&name) || name == "up",
                "{query}: {name} is not a metric the instances export ({exported:?})"
            );
            used.insert(name);
        }
        for word in query.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            assert!(
                !word.starts_with("stocklock_") || exported.iter().any(|e| e == word),
                "{query}: {word} is not exported"
            );
        }
    }
    let families = stocklock::metrics::COUNTERS_AND_GAUGES
        .iter()
        .chain(&stocklock::metrics::HISTOGRAMS);
    for family in families {
        assert!(
            used.iter().any(|name| name.starts_with(family)),
            "the dashboard shows nothing of {family}"
        );
    }

    // Every query parses as PromQL: promtool checks them as recording rules,
    // Grafana's variables replaced by what they stand for.
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, query) in queries.iter().enumerate() {
        let concrete = concrete_query(query);
        rules.push_str(&format!(
            "      - record: dashboard_query_{i}\n        expr: '{}'\n",
            concrete.replace('\'', "''")
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let rules_file = dir.path().join("dashboard.rules.yml");
    std::fs::write(&rules_file, &rules).unwrap();
    let Some(checked) = promtool(
        "grafana_is_provisioned_with_a_dashboard_of_exported_metrics",
        &["check".as_ref(), "rules".as_ref(), rules_file.as_os_str()],
    ) else {
        return;
    };
    assert!(
        checked.status.success(),
        "promtool check rules (the dashboard's queries):\n{}{}\n{rules}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
}
