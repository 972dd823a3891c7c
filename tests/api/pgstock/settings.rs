//! The PostgreSQL `up` starts is configured on purpose: each setting of
//! `stocklock::up::postgres::SETTINGS` is what the server says it runs
//! with, and `pg_stat_statements` counts a sale's statement.

use stocklock::lock::Hook;
use stocklock::pgstock;
use stocklock::up::postgres::SETTINGS;

use super::{BOUND, Protocol, buyer, migrated, sell};
use crate::helpers::within;
use crate::orders::postgres;

#[tokio::test]
async fn the_server_runs_with_what_up_says_and_counts_each_statement() {
    within(BOUND, async {
        let Some(server) = postgres().await else {
            return;
        };
        let mut admin = migrated(&server).await;
        for setting in SETTINGS {
            let row = admin
                .query_one(&format!("SHOW {}", setting.name), &[])
                .await
                .unwrap();
            let value: String = row.get(0);
            assert_eq!(value, setting.value, "{}", setting.name);
        }
        // Three sales by the conditional UPDATE: its statement counted three times.
        pgstock::reset(&admin, "counted", 5).await.unwrap();
        for _ in 0..3 {
            sell(
                Protocol::Update,
                &mut admin,
                &buyer("counted", None),
                &Hook::none(),
            )
            .await;
        }
        let calls: i64 = admin
            .query_one(
                "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
                 WHERE query LIKE '%UPDATE stock SET remaining = remaining - $%'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(calls, 3);
    })
    .await;
}
