//! The bench on other stacks: row `orders-vs-sales` on a stack with
//! orders, and a stack without chaos or the bare route.

use std::time::Duration;

use super::{bench, redis_time_per_sale_is_measured};
use crate::helpers::Stack;

/// Row `orders-vs-sales` on a stack with orders: each run sold its SKU
/// out with `lua-stream`, every sale became its order, and the row's
/// figures are the books' (orders per second, lag) and the run's sale rate.
#[tokio::test]
async fn the_orders_row_measures_the_pipeline_behind_the_sales() {
    if !stocklock::up::postgres::installed() {
        crate::helpers::missing_tool("PostgreSQL is not installed (scripts/deps.sh postgresql)");
        return;
    }
    let stack = Stack::start_with(2, None, &["--orders", "on"]).await;
    let (_, report) = bench(
        &stack,
        &[
            "--rows",
            "orders-vs-sales",
            "--runs",
            "1",
            "--concurrency",
            "16",
        ],
        Duration::from_secs(180),
    )
    .await;
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row["row"], "orders-vs-sales");
    assert_eq!(row["goal"], 0.9);
    let [orders_per_s, sales_per_s] = [0, 1].map(|i| row["runs"][0][i].as_f64().unwrap());
    assert!(orders_per_s > 0.0 && sales_per_s > 0.0, "{row}");
    // Every unit sold became its order, in this run's epoch.
    let state = stack.client.state("bench-orders").await.unwrap();
    assert_eq!((state.sold, state.remaining), (20_000, 0), "{state:?}");
    let books = stack.client.orders("bench-orders").await.unwrap();
    assert_eq!(books.summary.reserved, 20_000, "{:?}", books.summary);
    assert_eq!(books.summary.orders_per_s, Some(orders_per_s));
    let lags = &report["orders_vs_sales"];
    assert_eq!(
        lags["lag_p99_ms"].as_f64(),
        books.summary.lag_p99_ms,
        "{lags}"
    );
    assert_eq!(lags["lag_runs_ms"].as_array().unwrap().len(), 1, "{lags}");
    stack.stop().await;
}

/// `up --no-chaos` takes CONFIG away from Redis's clients: the bench still
/// measures Redis's time per sale there, from the counters' differences.
/// Without `--bench-bare` the lua-vs-bare row is skipped, naming the flag.
#[tokio::test]
async fn a_stack_without_chaos_is_measured_and_without_the_bare_route_its_row_is_skipped() {
    let stack = Stack::start_with(1, None, &["--no-chaos", "--redlock", "0"]).await;
    let (printed, report) = bench(
        &stack,
        &[
            "--rows",
            "lua-vs-healthz,lua-vs-bare,classroom-30-vs-1",
            "--runs",
            "1",
            "--duration",
            "300ms",
            "--concurrency",
            "8",
        ],
        Duration::from_secs(120),
    )
    .await;
    let rows: Vec<&str> = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["row"].as_str().unwrap())
        .collect();
    assert_eq!(rows, ["lua-vs-healthz"]);
    redis_time_per_sale_is_measured(&report);
    let skipped = report["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert_eq!(skipped[0]["row"], "lua-vs-bare");
    let why = skipped[0]["why"].as_str().unwrap();
    assert!(why.contains("--bench-bare"), "{why}");
    // A class steps through races at gates, which chaos mode alone allows.
    assert_eq!(skipped[1]["row"], "classroom-30-vs-1");
    let why = skipped[1]["why"].as_str().unwrap();
    assert!(why.contains("chaos mode"), "{why}");
    assert!(printed.contains("lua-vs-bare: skipped"), "{printed}");
    assert!(report["lua_vs_bare"].is_null());
    assert!(report["lua_batch"].is_null(), "rows not asked for");
    stack.stop().await;
}
