//! The session of a database lock's holder (`pg-for-update`,
//! `pg-advisory`) held at a gate, ended: by the explorer, as the holder's
//! process dying would (a crash), or by the database itself, its idle
//! timeout (the buyer's lease) run out under a frozen holder.

use std::time::{Duration, Instant};

use anyhow::Context;

use super::Run;
use crate::explore::{EARLY_LEASE_MS, STALL};

/// How long past the lease a silent holder's session may take to go.
const SESSION_SLACK: Duration = Duration::from_secs(5);

impl Run<'_> {
    /// Ends the one transaction of the database's lock held at a gate (the
    /// holder's: a buyer waiting for the lock is not idle in one), as its
    /// process's death would.
    pub(in crate::explore) async fn end_held_transaction(&self) -> anyhow::Result<()> {
        let client = self.database().await?;
        let pid = idle_holder(&client, true).await?;
        // Ended once its session is gone (its locks with it), as a dead
        // process's is by the time anyone else looks: the signal the
        // database sends it is only asked for.
        gone(&client, pid, STALL, "the dead holder's").await
    }

    /// Waits until PostgreSQL itself ended the session of the frozen
    /// holder of the database's lock (its transaction idle for the
    /// buyer's lease: `idle_in_transaction_session_timeout`), then wakes
    /// the buyers waiting for the lock. Nothing is done to the session: a
    /// database that never ends it (no idle timeout) stalls the schedule.
    pub(in crate::explore) async fn silent_session_ends(&mut self) -> anyhow::Result<()> {
        let client = self.database().await?;
        let pid = idle_holder(&client, false).await?;
        // Its lease is the explorer's short one (see `session::start`);
        // PostgreSQL ends the session on a timer of its own, at once, and
        // the slack is for a loaded machine's scheduling.
        let within = Duration::from_millis(EARLY_LEASE_MS) + SESSION_SLACK;
        gone(&client, pid, within, "the frozen holder's")
            .await
            .context("the database never ended a silent holder's session: its lock stays held")?;
        self.holders.clear();
        self.wake().await
    }

    async fn database(&self) -> anyhow::Result<tokio_postgres::Client> {
        let url = self
            .postgres_url
            .as_ref()
            .context("the stack's PostgreSQL, to end a holder's transaction")?;
        crate::orders::connect(url).await
    }
}

/// The one session idle in a transaction (the holder's, at its gate);
/// `terminate`: asks the database to end it.
async fn idle_holder(client: &tokio_postgres::Client, terminate: bool) -> anyhow::Result<i32> {
    let ended = client
        .query(
            "SELECT pid, CASE WHEN $1 THEN pg_terminate_backend(pid) END FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid() \
             AND state LIKE 'idle in transaction%'",
            &[&terminate],
        )
        .await?;
    anyhow::ensure!(
        ended.len() == 1,
        "{} transactions idle at a gate, where the holder's should be the one",
        ended.len()
    );
    Ok(ended[0].try_get(0)?)
}

/// Returns once session `pid` is gone; an error naming `whose` session
/// if it is still there after `within`.
async fn gone(
    client: &tokio_postgres::Client,
    pid: i32,
    within: Duration,
    whose: &str,
) -> anyhow::Result<()> {
    let since = Instant::now();
    while client
        .query_opt("SELECT 1 FROM pg_stat_activity WHERE pid = $1", &[&pid])
        .await?
        .is_some()
    {
        anyhow::ensure!(
            since.elapsed() < within,
            "{whose} session {pid} was still there after {within:?}"
        );
        tokio::time::sleep(super::waits::POLL).await;
    }
    Ok(())
}
