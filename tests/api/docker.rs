//! The Docker packaging, checked without a Docker engine: docker-compose.yml
//! must be a valid compose file (`docker-compose config` works offline), the
//! nginx.conf its nginx service renders from nginx/nginx.conf must pass
//! `nginx -t`, prometheus/prometheus.yml must scrape the instances nginx
//! fronts (and pass `promtool check config`), and Grafana's provisioning
//! must point at that Prometheus and a dashboard whose queries parse
//! (`promtool check rules`) and name only metrics the instances export.
//! Each test says SKIPPED on stderr when its tool is missing (and fails
//! when `CI=true`).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The three placeholders of nginx/nginx.conf, the only names the compose
/// file's envsubst may replace: every other `$name` is nginx's own.
const PLACEHOLDERS: [&str; 3] = [
    "STOCKLOCK_LISTEN",
    "STOCKLOCK_UPSTREAMS",
    "STOCKLOCK_RUN_DIR",
];

fn project_file(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|err| panic!("read {}: {err}", path.display()))
}

/// Says a test did not run (fails it under `CI=true`).
fn skipped(why: &str) {
    crate::helpers::missing_tool(why);
}

/// Whether `program args` runs and succeeds (a probe: output discarded).
fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

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

fn compose(args: &[&str]) -> Option<Output> {
    let file = project_file("docker-compose.yml");
    let mut command = compose_command()?;
    let output = command
        .arg("-f")
        .arg(&file)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run compose");
    Some(output)
}

/// The lines of one service in compose YAML (`config` output or the file
/// itself): from `  name:` under `services:` to the next top-level key or
/// service.
fn service_block(yaml: &str, name: &str) -> Option<String> {
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
fn environment_value(block: &str, name: &str) -> Option<String> {
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
        "prometheus",
        "grafana",
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
    }
    let nginx = service_block(&config, "nginx").unwrap();
    assert!(
        publishes(&nginx, 8080),
        "the nginx service does not publish port 8080:\n{nginx}"
    );
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
        let image = block
            .lines()
            .find_map(|line| line.trim().strip_prefix("image:"))
            .unwrap_or_else(|| panic!("{service} has no image:\n{block}"))
            .trim();
        let tag = image.rsplit_once(':').map(|(_, tag)| tag).unwrap_or("");
        assert!(
            tag != "latest" && tag.chars().filter(|c| *c == '.').count() == 2,
            "{service}'s image {image:?} is not pinned to a version x.y.z"
        );
    }
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

/// nginx on PATH, or where Debian puts it (/usr/sbin is not on every PATH).
fn nginx_binary() -> Option<PathBuf> {
    if succeeds("nginx", &["-v"]) {
        return Some(PathBuf::from("nginx"));
    }
    let debian = PathBuf::from("/usr/sbin/nginx");
    debian.exists().then_some(debian)
}

/// `host:port` with a port free right now on `host`: the compose file's
/// port (8080) may well be taken on a developer's machine, by `stocklock up`
/// for one, and `nginx -t` binds its listen addresses.
fn with_free_port(listen: &str) -> String {
    let (host, port) = listen
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("STOCKLOCK_LISTEN {listen:?} is not host:port"));
    port.parse::<u16>()
        .unwrap_or_else(|err| panic!("STOCKLOCK_LISTEN {listen:?}: bad port: {err}"));
    let probe = TcpListener::bind((host, 0)).expect("bind a free port");
    let free = probe.local_addr().expect("local addr").port();
    format!("{host}:{free}")
}

/// The compose upstreams with every `server HOST:PORT` pointed at
/// 127.0.0.1: the app-a/app-b names only resolve on the compose network,
/// and nginx resolves upstream names when it reads its config.
fn on_loopback(upstreams: &str) -> String {
    let servers: Vec<String> = upstreams
        .split(';')
        .map(str::trim)
        .filter(|directive| !directive.is_empty())
        .map(|directive| {
            let mut words: Vec<String> = directive.split_whitespace().map(str::to_owned).collect();
            assert!(
                words.len() >= 2 && words[0] == "server",
                "STOCKLOCK_UPSTREAMS holds {directive:?}, not a `server host:port ...;` directive"
            );
            let (_, port) = words[1]
                .rsplit_once(':')
                .unwrap_or_else(|| panic!("upstream {:?} has no port", words[1]));
            words[1] = format!("127.0.0.1:{port}");
            format!("{};", words.join(" "))
        })
        .collect();
    assert!(!servers.is_empty(), "STOCKLOCK_UPSTREAMS names no server");
    servers.join(" ")
}

#[test]
fn compose_nginx_template_renders_to_a_valid_config() {
    let Some(nginx) = nginx_binary() else {
        skipped(
            "compose_nginx_template_renders_to_a_valid_config: nginx is not \
             installed (apt-get install nginx)",
        );
        return;
    };

    let compose_text = read(&project_file("docker-compose.yml"));
    let service =
        service_block(&compose_text, "nginx").expect("an nginx service in docker-compose.yml");
    // The compose command must substitute exactly the three placeholders
    // (`$$` is compose's escape for `$`), or nginx's $remote_addr,
    // $upstream_addr, ... would be blanked.
    let envsubst = format!(
        "envsubst '{}'",
        PLACEHOLDERS.map(|name| format!("$${{{name}}}")).join(" ")
    );
    assert!(
        service.contains(&envsubst),
        "the nginx service no longer runs {envsubst}:\n{service}"
    );
    assert!(
        service.contains("./nginx/nginx.conf:"),
        "the nginx service no longer mounts ./nginx/nginx.conf:\n{service}"
    );
    let value = |name: &str| {
        environment_value(&service, name)
            .unwrap_or_else(|| panic!("no {name} in the nginx service's environment:\n{service}"))
    };

    let run_dir = tempfile::tempdir().expect("tempdir");
    let run_path = run_dir.path().to_str().expect("utf-8 temp path").to_owned();
    let listen = with_free_port(&value("STOCKLOCK_LISTEN"));
    let upstreams = on_loopback(&value("STOCKLOCK_UPSTREAMS"));
    // Set, and absolute, though the test writes to its own directory.
    let compose_run_dir = value("STOCKLOCK_RUN_DIR");
    assert!(
        compose_run_dir.starts_with('/'),
        "STOCKLOCK_RUN_DIR {compose_run_dir:?} is not an absolute path"
    );

    let template = read(&project_file("nginx/nginx.conf"));
    let mut rendered = template.clone();
    let mut replaced = 0;
    for (name, replacement) in PLACEHOLDERS.iter().zip([&listen, &upstreams, &run_path]) {
        let placeholder = format!("${{{name}}}");
        let count = rendered.matches(&placeholder).count();
        assert!(count > 0, "nginx/nginx.conf has no {placeholder}");
        replaced += count;
        rendered = rendered.replace(&placeholder, replacement);
    }
    // Like envsubst: nothing but the placeholders is touched, and no
    // placeholder is left outside comments.
    assert_eq!(
        rendered.matches('$').count(),
        template.matches('$').count() - replaced,
        "rendering touched a `$` that is not a placeholder"
    );
    for line in rendered
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
    {
        assert!(
            !line.contains("$STOCKLOCK_") && !line.contains("${STOCKLOCK_"),
            "a STOCKLOCK_ placeholder is left unfilled: {line:?}"
        );
    }

    let conf = run_dir.path().join("nginx.conf");
    std::fs::write(&conf, &rendered).expect("write the rendered nginx.conf");
    let output = Command::new(&nginx)
        .arg("-t")
        .arg("-p")
        .arg(format!("{run_path}/"))
        .arg("-e")
        .arg(run_dir.path().join("startup-error.log"))
        .arg("-c")
        .arg(&conf)
        .stdin(Stdio::null())
        .output()
        .expect("run nginx -t");
    assert!(
        output.status.success(),
        "nginx -t rejected the rendered config ({}):\n{}\n--- rendered nginx.conf ---\n{rendered}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

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
