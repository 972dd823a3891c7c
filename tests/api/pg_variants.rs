//! The database's variants (`pg-update`, `pg-for-update`, `pg-optimistic`,
//! `pg-advisory`, and `redis-then-pg`, whose truth is there too) behind `/deductStock` like every other: on a stack with
//! PostgreSQL two instances sell each unit once through nginx, the SKU's
//! state is read from the database's books, a request id is answered
//! once; without PostgreSQL they say which store is missing.

use std::time::Duration;

use stocklock::variants::Variant;

use crate::helpers::{Stack, burst, within};

fn database_variants() -> impl Iterator<Item = Variant> {
    Variant::ALL.into_iter().filter(|v| v.stock_in_postgres())
}

#[tokio::test]
async fn two_instances_sell_each_unit_of_the_database_once_through_nginx() {
    within(Duration::from_secs(180), async {
        if !stocklock::up::postgres::installed() {
            crate::helpers::missing_tool(
                "PostgreSQL is not installed (scripts/deps.sh postgresql)",
            );
            return;
        }
        let stack = Stack::start_with(2, None, &["--orders", "on"]).await;
        for variant in database_variants() {
            let sku = format!("db-{variant}");
            stack.reset(&sku, 20).await;
            let url = format!("{}/deductStock/{variant}?sku={sku}&work_ms=1", stack.url);
            let tally = burst(stack.http(), &url, 60, 16).await;
            let mut units = tally.units.clone();
            units.sort_unstable();
            // pg-optimistic may give up (429) while stock is left: it sells
            // no unit twice, and what it sold is what the books say.
            let sold = units.len() as i64;
            assert_eq!(
                units,
                (21 - sold..=20).collect::<Vec<i64>>(),
                "{variant}: each unit once, from the top"
            );
            if variant != Variant::PgOptimistic {
                assert_eq!(sold, 20, "{variant}: {:?}", tally.by_status);
            }
            assert_eq!(tally.by_instance.len(), 2, "{variant}: both instances sold");
            let state = stack.state(&sku).await;
            assert_eq!(
                (
                    state.sold,
                    state.remaining,
                    state.oversold,
                    state.duplicates
                ),
                (sold, 20 - sold, 0, 0),
                "{variant}: the database's books"
            );
            // A request id: sold once, the retry told the same.
            stack.reset(&sku, 5).await;
            let with_id = format!(
                "{}/deductStock/{variant}?sku={sku}&request_id=r1",
                stack.url
            );
            let first: serde_json::Value = stack
                .http()
                .get(&with_id)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let again: serde_json::Value = stack
                .http()
                .get(&with_id)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(first["outcome"], "sold", "{variant}: {first}");
            assert_eq!(again["unit"], first["unit"], "{variant}: {again}");
            assert_eq!(again["replayed"], true, "{variant}: {again}");
            assert_eq!(stack.state(&sku).await.sold, 1, "{variant}");
        }
        stack.stop().await;
    })
    .await;
}

#[tokio::test]
async fn without_postgres_the_database_variants_name_the_missing_store() {
    within(Duration::from_secs(120), async {
        let stack = Stack::start_with(1, None, &["--orders", "off"]).await;
        for variant in database_variants() {
            let url = format!("{}/deductStock/{variant}?sku={variant}", stack.url);
            let response = stack.http().get(&url).send().await.unwrap();
            assert_eq!(response.status().as_u16(), 503, "{variant}");
            let body: serde_json::Value = response.json().await.unwrap();
            assert_eq!(body["error"], "not_configured", "{variant}: {body}");
            let detail = body["detail"].as_str().unwrap_or_default();
            assert!(detail.contains("--postgres-url"), "{variant}: {detail}");
        }
        // Losing a commit's answer needs the relay to PostgreSQL: 403 here;
        // an empty `sql` is refused before that, 400.
        let chaos = format!("{}/api/admin/chaos", stack.url);
        for (sql, status, error) in [("commit", 403, "forbidden"), ("  ", 400, "invalid_input")] {
            let action = serde_json::json!({"action": "lose_commit_answer", "sql": sql});
            let response = stack
                .http()
                .post(&chaos)
                .bearer_auth(&stack.token)
                .json(&action)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status().as_u16(), status, "{sql:?}");
            let body: serde_json::Value = response.json().await.unwrap();
            assert_eq!(body["error"], error, "{sql:?}: {body}");
        }
        stack.stop().await;
    })
    .await;
}
