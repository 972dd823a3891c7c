//! The Docker packaging, checked without a Docker engine: docker-compose.yml
//! must be a valid compose file (`docker-compose config` works offline), the
//! nginx.conf its nginx service renders from nginx/nginx.conf must pass
//! `nginx -t` and, run, serve `/api/admin/` to a client of the Docker
//! network with the token only (`admin.rs`), prometheus/prometheus.yml must scrape the instances nginx
//! fronts (and pass `promtool check config`), and Grafana's provisioning
//! must point at that Prometheus and a dashboard whose queries parse
//! (`promtool check rules`) and name only metrics the instances export
//! (`observability.rs`).
//! Each test says SKIPPED on stderr when its tool is missing (and fails
//! when `CI=true`).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

mod admin;
mod compose;
use compose::{environment_value, service_block};
mod observability;

pub(crate) use observability::{concrete_query, dashboard_queries};

/// The four placeholders of nginx/nginx.conf, the only names the compose
/// file's envsubst may replace: every other `$name` is nginx's own.
const PLACEHOLDERS: [&str; 4] = [
    "STOCKLOCK_LISTEN",
    "STOCKLOCK_UPSTREAMS",
    "STOCKLOCK_RUN_DIR",
    "STOCKLOCK_ADMIN_ALLOW",
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
    // The compose command must substitute exactly the four placeholders
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
    let admin_allow = value("STOCKLOCK_ADMIN_ALLOW");
    for (name, replacement) in
        PLACEHOLDERS
            .iter()
            .zip([&listen, &upstreams, &run_path, &admin_allow])
    {
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
