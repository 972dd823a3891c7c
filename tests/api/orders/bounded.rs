//! The public orders view does bounded work: a crowd asking at once costs a
//! few reconciliations (counted as Redis's `XRANGE` calls), not one each;
//! the admin token still gets a fresh one; and the order stream keeps only
//! the messages no worker has acked, so its length falls back after a burst.

use std::time::Duration;

use serde_json::Value;
use stocklock::store::Keys;

use super::pipeline::{redis, stack_with};
use crate::helpers::{burst, within};

/// How many `XRANGE` calls Redis has served since it started.
async fn xrange_calls(conn: &mut stocklock::store::Conn) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_xrange:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |calls| calls.parse().unwrap())
}

#[tokio::test]
async fn a_crowd_on_the_orders_view_costs_a_few_reconciliations_and_the_stream_drains() {
    within(Duration::from_secs(120), async {
        let Some(stack) = stack_with(&["--pay-within", "10m"]).await else {
            return;
        };
        let sku = "bounded-view";
        stack.reset(sku, 50).await;
        let sell = format!("{}/deductStock/lua-stream?sku={sku}", stack.url);
        let tally = burst(stack.http(), &sell, 50, 16).await;
        assert_eq!(tally.count(200), 50, "{tally:?}");
        // The admin's view is fresh: it waits for the workers' progress.
        let settled = loop {
            let view = stack.client.orders(sku).await.unwrap();
            if view.reconciliation.in_flight == 0 && view.summary.reserved == 50 {
                break view;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(settled.reconciliation.clean(), "{}", settled.verdict);
        let mut conn = redis(&stack).await;
        let keys = Keys::tagged_with(sku);
        // Every message acked is gone from the stream.
        let length: i64 = redis::cmd("XLEN")
            .arg(&keys.orders)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(length, 0, "acked messages kept in the stream");

        let before = xrange_calls(&mut conn).await;
        let started = std::time::Instant::now();
        let view = format!("{}/api/orders?sku={sku}", stack.url);
        let crowd = (0..200).map(|_| {
            let ask = stack.http().get(&view).send();
            async move { ask.await.map(|answer| answer.status().as_u16()) }
        });
        let statuses: Vec<u16> = futures_util::future::join_all(crowd)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        let took = started.elapsed();
        assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
        let calls = xrange_calls(&mut conn).await - before;
        // Per instance, one reconciliation per 2 s window the crowd spanned
        // (each of at most 20 readings), whatever the crowd's size.
        let windows = took.as_secs() / 2 + 2;
        let bound = 2 * windows * 20;
        crate::helpers::note(&format!(
            "200 public orders views in {took:?}: {calls} XRANGE calls (bound {bound})"
        ));
        assert!(calls <= bound, "{calls} XRANGE calls for 200 views");
        // The cached answer is the same books, and says how old it is.
        let (status, cached) = stack.client.get(&format!("/api/orders?sku={sku}")).await;
        assert_eq!(status, 200, "{cached}");
        assert_eq!(cached["summary"]["reserved"], Value::from(50), "{cached}");
        assert!(
            cached["age_ms"].as_u64().is_some_and(|age| age <= 2000),
            "{cached}"
        );
        // A wrong admin token is refused, not served from the cache.
        let refused = stack
            .http()
            .get(&view)
            .bearer_auth("not-the-token")
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 401);
        stack.stop().await;
    })
    .await;
}
