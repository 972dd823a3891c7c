//! A PostgreSQL server as a child on loopback, in its own temporary
//! directory: the orders' database. Used by `stocklock up` (unless
//! `--orders off` or `--postgres-url`) and by the test suite.
//!
//! Debian's binaries, run without the package's cluster scripts: `initdb`
//! into `DIR/data` (scram-sha-256 password authentication, the bootstrap
//! superuser being the role `stocklock`, its password generated per server
//! and handed to initdb in a file removed after: never on a command line,
//! where `ps` shows it to every user; trust would make any local user the
//! superuser), then `postgres -D DIR/data -p PORT -k DIR/socket -c
//! listen_addresses=127.0.0.1`: TCP on loopback only, its unix socket in
//! the directory, `fsync` left on. Ready means serving: after the server's
//! "ready to accept connections" line, a real connection creates the
//! database `stocklock`. Stopped by pid with SIGINT (PostgreSQL's fast
//! shutdown: SIGTERM would wait for every client to leave).
//!
//! initdb and postgres refuse to run as root: run by root, both run as the
//! `postgres` system user the Debian package creates, in a directory it owns.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tempfile::TempDir;
use tokio::process::Command;
use tokio::sync::oneshot;

use super::process::{self, Running};
use crate::os::free_port;

/// How long initdb, then the server, may take (a busy 2-core machine).
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The role (the bootstrap superuser) and the database of the orders.
pub const ROLE: &str = "stocklock";
pub const DATABASE: &str = "stocklock";

/// Where Debian's `postgresql-N` packages put their binaries: `N/bin`.
const DEBIAN_LIB: &str = "/usr/lib/postgresql";

/// The line the server prints once it accepts connections (its messages
/// are in English: it runs with `LC_ALL=C`).
const READY_LINE: &str = "ready to accept connections";

/// A running PostgreSQL server. Stopped (SIGINT, then SIGKILL) by
/// [`stop`], killed by pid when dropped.
///
/// [`stop`]: PostgresServer::stop
pub struct PostgresServer {
    process: Running,
    port: u16,
    /// `data/` (the cluster) and `socket/`, removed with it.
    dir: TempDir,
    /// The role `stocklock`'s password (in [`PostgresServer::url`]).
    password: String,
    /// How long initdb and the start until ready took.
    pub timings: Timings,
}

/// How long a server took to come up.
#[derive(Clone, Copy, Debug)]
pub struct Timings {
    pub initdb: Duration,
    /// From spawning `postgres` to the database answering a connection.
    pub start: Duration,
}

process::runs_as_process!(PostgresServer);

/// The programs, and the user they run as when we are root.
struct Binaries {
    initdb: PathBuf,
    postgres: PathBuf,
    /// `(uid, gid)` of the `postgres` user when running as root.
    run_as: Option<(u32, u32)>,
}

impl PostgresServer {
    /// initdb in a new directory under `parent` (the system's temporary
    /// directory when `None`), then the server on a free loopback port
    /// (another, up to three times, if the one picked was taken meanwhile).
    /// Returns once the database `stocklock` answers.
    pub async fn start(parent: Option<&Path>) -> anyhow::Result<Self> {
        let binaries = require_postgres()?;
        let mut builder = tempfile::Builder::new();
        builder.prefix("stocklock-postgres-");
        let dir = match parent {
            Some(parent) => builder.tempdir_in(parent),
            None => builder.tempdir(),
        }
        .context("cannot create PostgreSQL's directory")?;
        let socket = dir.path().join("socket");
        std::fs::create_dir(&socket)?;
        if let Some((uid, gid)) = binaries.run_as {
            for path in [dir.path(), &socket] {
                std::os::unix::fs::chown(path, Some(uid), Some(gid))
                    .with_context(|| format!("cannot give {} to postgres", path.display()))?;
            }
        }
        let started = Instant::now();
        let password = crate::orders::new_token();
        initdb(&binaries, &dir.path().join("data"), &password).await?;
        let initdb_took = started.elapsed();
        let mut last_error = None;
        for _ in 0..3 {
            let port = free_port()?;
            let started = Instant::now();
            let (mut process, line) = spawn(&binaries, dir.path(), port)?;
            match ready(&mut process, line, port, &password).await {
                Ok(()) => {
                    return Ok(Self {
                        process,
                        port,
                        dir,
                        password,
                        timings: Timings {
                            initdb: initdb_took,
                            start: started.elapsed(),
                        },
                    });
                }
                Err(err) => {
                    process.stop_with(nix::sys::signal::Signal::SIGINT).await;
                    last_error = Some(err);
                }
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("postgres did not start")))
    }

    /// Stops it (fast shutdown: SIGINT, which ends the clients' sessions;
    /// SIGKILL after 5 s) and waits until it has exited.
    pub async fn stop(&mut self) {
        self.process
            .stop_with(nix::sys::signal::Signal::SIGINT)
            .await;
    }

    /// Starts it again, after it stopped or died, on its port and with its
    /// data (every committed order kept): a restart, as a managed database
    /// would be restarted. Returns once the database answers.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        // Reaps the old process (a no-op once it has been reaped).
        self.stop().await;
        let binaries = require_postgres()?;
        let started = Instant::now();
        let (mut process, line) = spawn(&binaries, self.dir.path(), self.port)?;
        if let Err(err) = ready(&mut process, line, self.port, &self.password).await {
            process.stop_with(nix::sys::signal::Signal::SIGINT).await;
            return Err(err.context(format!("postgres did not restart on port {}", self.port)));
        }
        self.process = process;
        self.timings.start = started.elapsed();
        Ok(())
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgresql://stocklock:PASSWORD@127.0.0.1:PORT/stocklock`: what
    /// the instances are given (by environment, `STOCKLOCK_POSTGRES_URL`).
    pub fn url(&self) -> String {
        url(self.port, DATABASE, &self.password)
    }

    /// Its directory (`data/`, `socket/`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

fn url(port: u16, database: &str, password: &str) -> String {
    format!("postgresql://{ROLE}:{password}@127.0.0.1:{port}/{database}")
}

/// A command for one of PostgreSQL's programs: as the `postgres` user when
/// we are root, with English messages, in `dir` (a directory it may enter).
fn command(binaries: &Binaries, program: &Path, dir: &Path) -> Command {
    let mut command = match binaries.run_as {
        Some((uid, gid)) => {
            let mut command = process::command_as(program, uid, gid);
            command.env("HOME", dir);
            command
        }
        None => process::command(program),
    };
    command
        .current_dir(dir)
        .env("LC_ALL", "C")
        .env_remove("PGDATA")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// `initdb` of a cluster in `data`: password authentication (scram), the
/// role `stocklock` with `password` as its superuser, UTF-8 without a
/// locale. The password goes through a file only its owner reads, removed
/// once initdb has run.
async fn initdb(binaries: &Binaries, data: &Path, password: &str) -> anyhow::Result<()> {
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
    Ok(())
}

/// `postgres` on `port`, its log (stderr) kept; and the receiver of its
/// ready line.
fn spawn(
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
async fn ready(
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
    client.batch_execute("SELECT 1").await?;
    Ok(())
}

/// The binaries (the newest of Debian's `/usr/lib/postgresql/N/bin`, or
/// `initdb` and `postgres` on `PATH`, symlinks resolved), and the user to
/// run them as; or how to install them.
fn require_postgres() -> anyhow::Result<Binaries> {
    let bin = bin_dir().context(
        "PostgreSQL is not installed (no initdb and postgres). Install it with:\n    sudo apt-get update && sudo apt-get install -y postgresql",
    )?;
    let run_as = if nix::unistd::geteuid().is_root() {
        let user = nix::unistd::User::from_name("postgres")
            .ok()
            .flatten()
            .context(
                "initdb and postgres refuse to run as root, and there is no `postgres` user to run them as (Debian's postgresql package creates it)",
            )?;
        Some((user.uid.as_raw(), user.gid.as_raw()))
    } else {
        None
    };
    Ok(Binaries {
        initdb: bin.join("initdb"),
        postgres: bin.join("postgres"),
        run_as,
    })
}

/// Whether PostgreSQL's server binaries are installed.
pub fn installed() -> bool {
    bin_dir().is_some()
}

/// The directory of the server's binaries: the newest version under
/// `/usr/lib/postgresql`, else the one `initdb` on `PATH` resolves to.
pub fn bin_dir() -> Option<PathBuf> {
    let has_both = |dir: &Path| dir.join("initdb").is_file() && dir.join("postgres").is_file();
    let newest = std::fs::read_dir(DEBIAN_LIB)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = version_of(&entry.file_name().to_string_lossy())?;
            let bin = entry.path().join("bin");
            has_both(&bin).then_some((version, bin))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, bin)| bin);
    newest.or_else(|| {
        let initdb = std::fs::canonicalize(crate::os::find_program("initdb")?).ok()?;
        let bin = initdb.parent()?.to_owned();
        has_both(&bin).then_some(bin)
    })
}

/// `15` → `[15]`, `9.6` → `[9, 6]`; `None` for a name that is no version.
fn version_of(name: &str) -> Option<Vec<u32>> {
    name.split('.').map(|part| part.parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::version_of;

    #[test]
    fn versions_compare_as_numbers() {
        assert!(version_of("16") > version_of("9.6"));
        assert!(version_of("15") > version_of("9"));
        assert_eq!(version_of("common"), None);
    }
}
