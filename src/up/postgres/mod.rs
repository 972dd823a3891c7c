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

mod binaries;
mod boot;
mod settings;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use tempfile::TempDir;

use self::binaries::require_postgres;
pub use self::binaries::{bin_dir, installed};
use self::boot::{initdb, ready, spawn};
pub use self::settings::{SETTINGS, Setting};
use super::process::{self, Running};
use crate::os::free_port;

/// How long initdb, then the server, may take (a busy 2-core machine).
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The role (the bootstrap superuser) and the database of the orders.
pub const ROLE: &str = "stocklock";
pub const DATABASE: &str = "stocklock";

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
