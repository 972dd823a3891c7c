//! A server's way up: `initdb` of its cluster, `postgres` spawned on a
//! port, and the wait until it is ready and its database answers.

use std::path::Path;
use std::process::Stdio;

use anyhow::{Context, bail};
use tokio::sync::oneshot;

use super::binaries::{Binaries, command};
use super::{DATABASE, READY_LINE, READY_TIMEOUT, ROLE, url};
use crate::up::process::{self, Running};

/// `initdb` of a cluster in `data`: password authentication (scram), the
/// role `stocklock` with `password` as its superuser, UTF-8 without a
/// locale. The password goes through a file only its owner reads, removed
/// once initdb has run.
pub(super) async fn initdb(binaries: &Binaries, data: &Path, password: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let parent = data.parent().unwrap_or(data);
    let pwfile = parent.join("pwfile");
    {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&pwfile)
            .context("cannot write initdb's password file")?;
        writeln!(file, "{password}")?;
    }
    if let Some((uid, gid)) = binaries.run_as {
        std::os::unix::fs::chown(&pwfile, Some(uid), Some(gid))
            .context("cannot give the password file to postgres")?;
    }
    let run = command(binaries, &binaries.initdb, parent)
        .arg("-D")
        .arg(data)
        .args([
            "-A",
            "scram-sha-256",
            "-U",
            ROLE,
            "-E",
            "UTF8",
            "--no-locale",
        ])
        .arg(format!("--pwfile={}", pwfile.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output();
    let output = tokio::time::timeout(READY_TIMEOUT, run)
        .await
        .with_context(|| format!("initdb took more than {READY_TIMEOUT:?}"))?
        .with_context(|| format!("cannot run {}", binaries.initdb.display()));
    // Its work done (or failed): the cluster keeps only a scram verifier.
    let _ = std::fs::remove_file(&pwfile);
    let output = output?;
    if !output.status.success() {
        bail!(
            "initdb failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    configure(data)
}

/// Appends `up`'s settings ([`super::SETTINGS`]) to the cluster's
/// `postgresql.conf`: a file, not `-c` on the command line, so that a
/// setting changed live (`ALTER SYSTEM` and a reload, as the bench's
/// `pg-update-sync-off-vs-on` does) takes effect; the command line would
/// outrank it.
fn configure(data: &Path) -> anyhow::Result<()> {
    use std::io::Write;
    let path = data.join("postgresql.conf");
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    writeln!(
        file,
        "\n# stocklock up: each on purpose (up::postgres::SETTINGS, docs/stack.md)"
    )?;
    for setting in super::SETTINGS {
        writeln!(file, "{} = '{}'", setting.name, setting.value)?;
    }
    Ok(())
}

/// `postgres` on `port`, its log (stderr) kept; and the receiver of its
/// ready line.
pub(super) fn spawn(
    binaries: &Binaries,
    dir: &Path,
    port: u16,
) -> anyhow::Result<(Running, oneshot::Receiver<String>)> {
    let mut child = command(binaries, &binaries.postgres, dir)
        .arg("-D")
        .arg(dir.join("data"))
        .args(["-p", &port.to_string()])
        .arg("-k")
        .arg(dir.join("socket"))
        .args(["-c", "listen_addresses=127.0.0.1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {}", binaries.postgres.display()))?;
    let stderr = child.stderr.take().context("postgres stderr")?;
    let (output, ready) = process::watch_output(stderr, Some(READY_LINE), None);
    let mut running = Running::new(child, output);
    if binaries.run_as.is_some() {
        // Run as `postgres`, it is not held by the `__child` wrapper: a
        // guard kills the server and its backends (its process group) if
        // `up` dies.
        running = running.guarded()?;
    }
    Ok((running, ready))
}

/// Waits for the server's ready line, then makes a real connection and
/// creates the database `stocklock` (owned by the role `stocklock`, the
/// superuser); fails with the server's log if it exits first, or after
/// [`READY_TIMEOUT`].
pub(super) async fn ready(
    process: &mut Running,
    line: oneshot::Receiver<String>,
    port: u16,
    password: &str,
) -> anyhow::Result<()> {
    let deadline = tokio::time::sleep(READY_TIMEOUT);
    tokio::pin!(deadline);
    let exited = |status: std::io::Result<std::process::ExitStatus>, log: String| {
        let status = status.map_or_else(|err| err.to_string(), |s| s.to_string());
        anyhow::anyhow!("postgres on port {port} exited ({status}) before it was ready:\n{log}")
    };
    tokio::select! {
        said = line => if said.is_err() {
            // Its stderr closed without the line: it is exiting.
            let status = process.exited().await;
            return Err(exited(status, process.log()));
        },
        status = process.exited() => return Err(exited(status, process.log())),
        _ = &mut deadline => bail!("postgres on port {port} was not ready after {READY_TIMEOUT:?}:\n{}", process.log()),
    }
    tokio::select! {
        created = create_database(port, password) => created,
        status = process.exited() => Err(exited(status, process.log())),
        _ = &mut deadline => bail!("postgres on port {port} did not answer within {READY_TIMEOUT:?}:\n{}", process.log()),
    }
}

/// Creates the database `stocklock` unless it exists, then connects to it.
async fn create_database(port: u16, password: &str) -> anyhow::Result<()> {
    let admin = crate::orders::connect(&url(port, "postgres", password)).await?;
    let exists = admin
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&DATABASE])
        .await?
        .is_some();
    if !exists {
        admin
            .batch_execute(&format!("CREATE DATABASE {DATABASE} OWNER {ROLE}"))
            .await
            .context("cannot create the database")?;
    }
    let client = crate::orders::connect(&url(port, DATABASE, password)).await?;
    // Each statement's calls and time (its library is preloaded: SETTINGS).
    client
        .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .await
        .context("cannot create the extension pg_stat_statements")?;
    Ok(())
}
