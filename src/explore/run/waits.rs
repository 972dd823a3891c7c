//! The one wait the explorer cannot hear announced: a buyer inside
//! PostgreSQL, queued behind another transaction's row or advisory lock
//! (`pg-for-update`, `pg-advisory`, and any statement that meets a row
//! another holds). The database says so itself: such a backend waits on
//! a `Lock` and names who blocks it.

use std::time::Duration;

/// How often the database is asked again while a buyer on its way is
/// neither at a gate nor known to wait.
pub(in crate::explore) const POLL: Duration = Duration::from_millis(10);

/// The stack's PostgreSQL (the database's variants'), asked who waits.
pub(in crate::explore) struct DatabaseWaits {
    url: Option<String>,
    client: Option<tokio_postgres::Client>,
}

impl DatabaseWaits {
    pub(in crate::explore) fn new(url: Option<String>) -> Self {
        Self { url, client: None }
    }

    /// Whether the stack has a database to ask.
    pub(in crate::explore) fn is_some(&self) -> bool {
        self.url.is_some()
    }

    /// How many sessions of the stack's database wait for a lock that
    /// another session holds now. A lock its holder just released is
    /// already granted to its waiter, which then blocks on nobody (and is
    /// no longer counted) even before it runs again. A database the
    /// explorer stopped (`postgres-restart`) holds nobody: none.
    pub(in crate::explore) async fn held_at_a_lock(&mut self) -> usize {
        let Some(url) = &self.url else {
            return 0;
        };
        if self.client.as_ref().is_none_or(|c| c.is_closed()) {
            self.client = crate::orders::connect(url).await.ok();
        }
        let Some(client) = &self.client else {
            return 0;
        };
        let asked = client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid() \
                 AND wait_event_type = 'Lock' \
                 AND cardinality(pg_blocking_pids(pid)) > 0",
                &[],
            )
            .await
            .and_then(|row| row.try_get::<_, i64>(0));
        match asked {
            Ok(count) => usize::try_from(count).unwrap_or(0),
            Err(_) => {
                self.client = None;
                0
            }
        }
    }
}
