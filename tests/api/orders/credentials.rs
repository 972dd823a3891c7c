//! Credentials stay off command lines: a stack from `up` passes the Redis
//! and PostgreSQL URLs to its instances by environment (`ps` shows every
//! user's command lines, `/proc/PID/environ` only the owner's), and its
//! PostgreSQL takes a password (scram-sha-256), generated per run.

use std::time::Duration;

use crate::helpers::within;

/// Every process's command line on the machine, by pid.
fn command_lines() -> Vec<(u32, String)> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        // A process may end between the listing and the read.
        if let Ok(raw) = std::fs::read(entry.path().join("cmdline")) {
            let line = String::from_utf8_lossy(&raw).replace('\0', " ");
            lines.push((pid, line));
        }
    }
    lines
}

#[tokio::test]
async fn no_command_line_carries_a_store_url_and_postgres_wants_the_password() {
    within(Duration::from_secs(120), async {
        let Some(stack) = super::pipeline::stack_with(&[]).await else {
            return;
        };
        let postgres = stack
            .postgres
            .clone()
            .expect("up announced no postgres line");
        let redis_url = stack.redis_url.clone().expect("up announced its redis");
        // postgresql://stocklock:PASSWORD@127.0.0.1:PORT/stocklock
        let (authority, _) = postgres.url["postgresql://".len()..]
            .split_once('/')
            .unwrap();
        let (user, host) = authority.rsplit_once('@').unwrap();
        let secrets = [redis_url.as_str(), host, postgres.url.as_str()];
        let leaks: Vec<(u32, String)> = command_lines()
            .into_iter()
            .filter(|(_, line)| secrets.iter().any(|secret| line.contains(secret)))
            .collect();
        assert!(leaks.is_empty(), "store URLs on command lines: {leaks:?}");
        let password = user
            .split_once(':')
            .map(|(_, password)| password.to_owned())
            .expect("the postgres URL has no password");
        assert!(password.len() >= 32, "a short password: {password}");
        assert!(
            command_lines()
                .iter()
                .all(|(_, line)| !line.contains(&password)),
            "the password is on a command line"
        );
        // Without the password, or with another one, PostgreSQL refuses.
        for url in [
            format!("postgresql://stocklock@{host}/stocklock"),
            format!("postgresql://stocklock:not-{password}@{host}/stocklock"),
        ] {
            let refused = stocklock::orders::connect(&url).await;
            assert!(refused.is_err(), "{url}: PostgreSQL let us in");
        }
        stocklock::orders::connect(&postgres.url)
            .await
            .expect("the announced URL connects");
        stack.stop().await;
    })
    .await;
}
