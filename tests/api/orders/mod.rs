//! The orders' PostgreSQL, real: a server started on a free loopback port
//! (initdb into a temporary directory) and stopped by pid, the schema's
//! migrations (applied once per file however often and however many
//! instances run them), the unique constraints that refuse a duplicate
//! order, and `stocklock up` with orders on. Its modules: the pipeline end
//! to end, Redis losing its data under it, expiry failing half-way, an
//! insert refused by another order, and orders owned by their buyer.
//!
//! Without PostgreSQL the tests say SKIPPED (and fail under CI=true).

mod bounded;
mod conflict;
mod credentials;
mod data_loss;
mod expiry;
mod gates;
mod ownership;
mod pipeline;

use std::future::Future;
use std::time::Duration;

use stocklock::orders::{self, Client, MIGRATIONS};
use stocklock::up::postgres::PostgresServer;
use tokio_postgres::error::SqlState;

use crate::helpers;
use crate::helpers::note;

/// Each test's own bound: it fails rather than hangs.
const BOUND: Duration = Duration::from_secs(120);

async fn bounded<T>(body: impl Future<Output = T>) -> T {
    crate::helpers::within(BOUND, body).await
}

/// A fresh PostgreSQL server; `None` (SKIPPED, a failure under CI=true)
/// when PostgreSQL is not installed.
pub(crate) async fn postgres() -> Option<PostgresServer> {
    if !stocklock::up::postgres::installed() {
        helpers::missing_tool("PostgreSQL is not installed (scripts/deps.sh postgresql)");
        return None;
    }
    let server = PostgresServer::start(None).await.expect("start postgres");
    note(&format!(
        "postgres on port {}: initdb {:?}, start to first answer {:?}",
        server.port(),
        server.timings.initdb,
        server.timings.start
    ));
    Some(server)
}

/// Stops the server and checks its process is gone.
async fn stop(mut server: PostgresServer) {
    let pid = server.pid().expect("a running server has a pid");
    let started = std::time::Instant::now();
    server.stop().await;
    note(&format!("postgres stopped in {:?}", started.elapsed()));
    assert_eq!(server.pid(), None, "postgres was not reaped");
    assert!(!helpers::alive(pid), "postgres pid {pid} still running");
}

/// A client of the server's `stocklock` database, migrated.
async fn migrated(server: &PostgresServer) -> Client {
    let mut client = orders::connect(&server.url()).await.unwrap();
    orders::migrate(&mut client).await.unwrap();
    client
}

/// `migrations/*.sql`, as on disk: what must be embedded and applied.
fn migration_files() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".sql"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_migration_file_is_embedded_in_order() {
    let embedded: Vec<String> = MIGRATIONS
        .iter()
        .map(|m| format!("{:04}_{}.sql", m.version, m.name))
        .collect();
    assert_eq!(embedded, migration_files());
}

#[tokio::test]
async fn postgres_serves_on_loopback_and_stops_by_pid() {
    bounded(async {
        let Some(server) = postgres().await else {
            return;
        };
        let client = orders::connect(&server.url()).await.unwrap();
        let row = client
            .query_one(
                "SELECT current_user::text, current_database()::text,
                        current_setting('listen_addresses'), current_setting('fsync'),
                        current_setting('port')",
                &[],
            )
            .await
            .unwrap();
        let (user, database): (String, String) = (row.get(0), row.get(1));
        assert_eq!(
            (user.as_str(), database.as_str()),
            ("stocklock", "stocklock")
        );
        assert_eq!(row.get::<_, String>(2), "127.0.0.1");
        assert_eq!(row.get::<_, String>(3), "on", "fsync is left on");
        assert_eq!(row.get::<_, String>(4), server.port().to_string());
        // Its unix socket is in its own directory, not /var/run/postgresql.
        let socket = server
            .dir()
            .join("socket")
            .join(format!(".s.PGSQL.{}", server.port()));
        assert!(socket.exists(), "no socket at {}", socket.display());
        drop(client);
        let port = server.port();
        stop(server).await;
        assert!(
            orders::connect(&format!(
                "postgresql://stocklock@127.0.0.1:{port}/stocklock"
            ))
            .await
            .is_err(),
            "something still answers on {port}"
        );
    })
    .await;
}

#[tokio::test]
async fn migrations_applied_twice_and_at_once_leave_one_row_per_file() {
    bounded(async {
        let Some(server) = postgres().await else {
            return;
        };
        // Two instances starting at once: each migrates on its own connection.
        let migrating = (0..2).map(|_| {
            let url = server.url();
            tokio::spawn(async move {
                let mut client = orders::connect(&url).await.unwrap();
                orders::migrate(&mut client).await.unwrap()
            })
        });
        let applied: Vec<Vec<i64>> = futures_util::future::join_all(migrating)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        let every: Vec<i64> = MIGRATIONS.iter().map(|m| m.version).collect();
        // One of them applied every file; the other, after its lock, none.
        let mut sorted = applied.clone();
        sorted.sort();
        assert_eq!(sorted, vec![Vec::new(), every.clone()], "{applied:?}");
        // And again, later: nothing to do.
        let mut client = orders::connect(&server.url()).await.unwrap();
        assert_eq!(
            orders::migrate(&mut client).await.unwrap(),
            Vec::<i64>::new()
        );
        let rows = client
            .query(
                "SELECT version, name FROM schema_migrations ORDER BY version",
                &[],
            )
            .await
            .unwrap();
        let recorded: Vec<String> = rows
            .iter()
            .map(|row| {
                format!(
                    "{:04}_{}.sql",
                    row.get::<_, i64>(0),
                    row.get::<_, String>(1)
                )
            })
            .collect();
        assert_eq!(recorded, migration_files(), "one row per file");
        drop(client);
        stop(server).await;
    })
    .await;
}

/// Inserts one order of epoch 1: unit `unit` of `sku`, its sale number
/// `sale`; the database's answer.
async fn insert(
    client: &Client,
    sku: &str,
    unit: i64,
    sale: i64,
    request_id: Option<&str>,
) -> Result<u64, tokio_postgres::Error> {
    client
        .execute(
            "INSERT INTO orders (sku, epoch, unit, sale, request_id, status)
             VALUES ($1, 1, $2, $3, $4, 'pending_payment')",
            &[&sku, &unit, &sale, &request_id],
        )
        .await
}

/// The unique constraint a refused insert violated.
fn violated(refused: Result<u64, tokio_postgres::Error>) -> String {
    let err = refused.expect_err("the duplicate was accepted");
    let db = err.as_db_error().expect("an error from the database");
    assert_eq!(db.code(), &SqlState::UNIQUE_VIOLATION, "{db}");
    db.constraint().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn the_database_refuses_a_duplicate_order() {
    bounded(async {
        let Some(server) = postgres().await else {
            return;
        };
        let client = migrated(&server).await;
        assert_eq!(
            insert(&client, "00001", 50, 1, Some("r1")).await.unwrap(),
            1
        );
        // The same unit of the same SKU again, under another sale and request id.
        assert_eq!(
            violated(insert(&client, "00001", 50, 2, Some("r2")).await),
            "orders_live_unit_key"
        );
        // The same sale again (a redelivered message), for whatever unit.
        assert_eq!(
            violated(insert(&client, "00001", 49, 1, Some("r3")).await),
            "orders_sale_key"
        );
        // The same request id for another unit.
        assert_eq!(
            violated(insert(&client, "00001", 49, 2, Some("r1")).await),
            "orders_request_id_key"
        );
        // Once its reservation expired, the unit may be sold and ordered again.
        client
            .execute(
                "UPDATE orders SET status = 'expired' WHERE sku = '00001'",
                &[],
            )
            .await
            .unwrap();
        assert_eq!(
            insert(&client, "00001", 50, 2, Some("r2")).await.unwrap(),
            1
        );
        client
            .execute("DELETE FROM orders WHERE status = 'expired'", &[])
            .await
            .unwrap();
        // The same unit of another SKU, and orders without a request id, are fine.
        assert_eq!(insert(&client, "00002", 50, 1, None).await.unwrap(), 1);
        assert_eq!(insert(&client, "00002", 49, 2, None).await.unwrap(), 1);
        let row = client
            .query_one(
                "SELECT count(*), count(*) FILTER (WHERE status = 'pending_payment'
                     AND created_at IS NOT NULL AND pay_by IS NULL) FROM orders",
                &[],
            )
            .await
            .unwrap();
        assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (3, 3));
        // A status outside the three is refused too.
        let err = client
            .execute("UPDATE orders SET status = 'lost' WHERE unit = 49", &[])
            .await
            .expect_err("an unknown status was accepted");
        assert_eq!(
            err.as_db_error().map(|db| db.code()),
            Some(&SqlState::CHECK_VIOLATION)
        );
        drop(client);
        stop(server).await;
    })
    .await;
}

#[tokio::test]
async fn up_with_orders_runs_postgres_and_its_instances_migrate_it() {
    if !stocklock::up::postgres::installed() {
        helpers::missing_tool("PostgreSQL is not installed (scripts/deps.sh postgresql)");
        return;
    }
    let stack = helpers::Stack::start_with(2, None, &["--orders", "on"]).await;
    let postgres = stack
        .postgres
        .clone()
        .expect("up announced no postgres line");
    // Its generated password (64 hex digits) in the URL.
    assert!(
        postgres.url.starts_with("postgresql://stocklock:")
            && postgres.url.contains("@127.0.0.1:")
            && postgres.url.ends_with("/stocklock"),
        "{}",
        postgres.url
    );
    assert!(helpers::alive(postgres.pid));
    let client = orders::connect(&postgres.url).await.unwrap();
    let versions: Vec<i64> = client
        .query(
            "SELECT version FROM schema_migrations ORDER BY version",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(versions.len(), migration_files().len(), "{versions:?}");
    let orders: i64 = client
        .query_one("SELECT count(*) FROM orders", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(orders, 0);
    drop(client);
    let pid = postgres.pid;
    // Stop checks that no child, postgres included, is left running.
    stack.stop().await;
    assert!(!helpers::alive(pid));
}

/// `up` restarts its PostgreSQL when it exits, on its port and with its
/// data (the schema and every committed order are still there).
#[tokio::test]
async fn up_restarts_its_postgres_with_its_data_when_it_exits() {
    if !stocklock::up::postgres::installed() {
        helpers::missing_tool("PostgreSQL is not installed (scripts/deps.sh postgresql)");
        return;
    }
    let mut stack = helpers::Stack::start_with(1, None, &["--orders", "on"]).await;
    let before = stack
        .postgres
        .clone()
        .expect("up announced no postgres line");
    // Fast shutdown, as `pg_ctl stop -m fast` would: the server exits by itself.
    stocklock::os::signal(before.pid, nix::sys::signal::Signal::SIGINT);
    stack
        .next_line("postgres: ", Duration::from_secs(60))
        .await
        .expect("up did not restart postgres");
    let after = stack.postgres.clone().unwrap();
    assert_ne!(after.pid, before.pid);
    assert_eq!(after.url, before.url, "not on its port");
    assert!(!helpers::alive(before.pid));
    let client = orders::connect(&after.url).await.unwrap();
    let migrations: i64 = client
        .query_one("SELECT count(*) FROM schema_migrations", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        migrations as usize,
        migration_files().len(),
        "its data is gone"
    );
    drop(client);
    stack.stop().await;
    assert!(!helpers::alive(after.pid));
}

#[tokio::test]
async fn up_with_a_postgres_url_starts_none_and_its_instances_migrate_that_one() {
    bounded(async {
        let Some(server) = postgres().await else {
            return;
        };
        let stack = helpers::Stack::start_with(1, None, &["--postgres-url", &server.url()]).await;
        assert_eq!(stack.postgres, None, "up started a PostgreSQL of its own");
        let client = orders::connect(&server.url()).await.unwrap();
        let migrations: i64 = client
            .query_one("SELECT count(*) FROM schema_migrations", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(migrations as usize, migration_files().len());
        drop(client);
        stack.stop().await;
        // The stack leaves the user's PostgreSQL running.
        assert!(helpers::alive(server.pid().unwrap()));
        stop(server).await;
    })
    .await;
}
