//! scripts/deps.sh respects the machine: run under fake `systemctl`,
//! `apt-get`, `dpkg`, `pg_lsclusters` and `pg_ctlcluster` first on PATH
//! (they act on files in a temporary directory), it stops only the services
//! and PostgreSQL clusters its own install started, leaves the ones that
//! were running before alone, and says what it stopped.

use std::path::Path;
use std::process::Command;

/// The fakes: `STATE/active/NAME` is an active service, `STATE/clusters`
/// pg_lsclusters' lines, `STATE/log` what was stopped. The install starts
/// redis-server and a PostgreSQL cluster 16/main, as Debian's postinst does.
const FAKES: &[(&str, &str)] = &[
    (
        "systemctl",
        r#"case "$1" in
  is-active) [ -e "$STATE/active/${@: -1}" ] ;;
  disable) rm -f "$STATE/active/${@: -1}"; echo "disable ${@: -1}" >> "$STATE/log" ;;
  stop) rm -f "$STATE/active/${@: -1}"; echo "stop ${@: -1}" >> "$STATE/log" ;;
  *) exit 0 ;;
esac"#,
    ),
    (
        "apt-get",
        r#"if [ "$1" = install ]; then
  touch "$STATE/active/redis-server"
  echo "16 main 5433 online postgres /var/lib/postgresql/16/main /var/log/16.log" >> "$STATE/clusters"
fi"#,
    ),
    ("dpkg", "exit 1"),
    ("pg_lsclusters", r#"cat "$STATE/clusters""#),
    (
        "pg_ctlcluster",
        r#"echo "pg_ctlcluster $*" >> "$STATE/log""#,
    ),
];

fn write_fakes(bin: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for (name, body) in FAKES {
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/usr/bin/env bash\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

#[test]
fn deps_stops_only_what_its_install_started() {
    let dir = tempfile::tempdir().unwrap();
    let (bin, state) = (dir.path().join("bin"), dir.path().join("state"));
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(state.join("active")).unwrap();
    write_fakes(&bin);
    // The learner's own: nginx and postgresql active, cluster 15/main online.
    std::fs::write(state.join("active/nginx"), "").unwrap();
    std::fs::write(state.join("active/postgresql"), "").unwrap();
    std::fs::write(
        state.join("clusters"),
        "15 main 5432 online postgres /var/lib/postgresql/15/main /var/log/15.log\n",
    )
    .unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/deps.sh");
    // A package no machine has: something to install.
    let output = Command::new("bash")
        .arg(&script)
        .arg("stocklock-test-package")
        .env("PATH", path)
        .env("STATE", &state)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "deps.sh failed: {said}");
    let log = std::fs::read_to_string(state.join("log")).unwrap_or_default();
    assert!(!log.contains("nginx"), "stopped the learner's nginx: {log}");
    assert!(
        !log.contains("postgresql"),
        "stopped the learner's postgresql: {log}"
    );
    assert!(
        !log.contains(" 15 main"),
        "stopped the learner's cluster: {log}"
    );
    assert!(state.join("active/nginx").exists());
    assert!(log.contains("disable redis-server"), "{log}");
    assert!(!state.join("active/redis-server").exists(), "{log}");
    assert!(log.contains("pg_ctlcluster 16 main stop"), "{log}");
    assert!(
        said.contains("stopping redis-server"),
        "it did not say what it stopped: {said}"
    );
    assert!(said.contains("16/main"), "{said}");
    assert!(
        said.contains("installing: stocklock-test-package (size unknown)"),
        "it did not say what it installs: {said}"
    );
}
