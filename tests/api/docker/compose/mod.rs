//! docker-compose.yml, read by `docker-compose config` (offline): a valid
//! file with every service, the instances knowing every store by its
//! service name, pinned images and loopback-only ports.
//!
//! This file: running compose, and reading a service's block and its
//! environment; `services.rs`: the resolved file's services; `secrets.rs`:
//! no well-known admin token or Grafana password.

use std::process::{Command, Output, Stdio};

use super::*;

mod secrets;
mod services;

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
