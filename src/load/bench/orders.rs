//! Row `orders-vs-sales`: does the order pipeline keep up with the sale?
//!
//! Each run resets a SKU to [`UNITS`] units and sells all of them with
//! `lua-stream` ([`UNITS`] requests at the bench's concurrency), then waits
//! for the workers to write every order and reads the SKU's books: the
//! orders written per second (from the epoch's first sale to its last
//! order row) against the sale rate of the same run, and the lag from
//! sale to order row. A run whose books do not reconcile (a sale without
//! its order, anything still in flight) fails the bench: the figures would
//! not be of a finished pipeline. Skipped on a stack without orders.

use super::report::OrdersVsSales;
use super::*;

/// Units sold per run, and requests sent: the first try of a new user
/// (`load --variant lua-stream --stock 20000 --requests 20000`).
const UNITS: u64 = 20_000;

/// Orders per second at least this share of the sale rate ...
const GOAL: f64 = 0.9;
/// ... and the lag's 99th percentile at most this.
const GOAL_LAG_P99_MS: f64 = 1000.0;

impl Bench {
    pub(super) async fn orders_vs_sales(&mut self) -> anyhow::Result<()> {
        let sku = "bench-orders";
        self.client.reset(sku, UNITS as i64, 0).await?;
        if let Err(err) = self.client.orders(sku).await {
            self.skip(
                "orders-vs-sales",
                &format!("the stack has no orders ({err:#}): start it with PostgreSQL (`up`, not `--orders off`)"),
            );
            return Ok(());
        }
        let path = format!("/deductStock/lua-stream?sku={sku}");
        let (mut runs, mut lags) = (Vec::new(), Vec::new());
        for run in 0..self.config.runs {
            // A fresh epoch each run: its books are this run's alone.
            if run > 0 {
                self.client.reset(sku, UNITS as i64, 0).await?;
            }
            let tally = self.sold_all(&path).await?;
            let books = crate::load::orders::check(&self.client, sku)
                .await
                .context("the stack stopped answering for its orders")?;
            if !books.clean || books.orders != tally.sold as i64 {
                bail!(
                    "{sku}: {} sold, {} orders, reconcile says: {}",
                    tally.sold,
                    books.orders,
                    books.verdict
                );
            }
            let (Some(orders_per_s), Some(p50), Some(p99)) =
                (books.orders_per_s, books.lag_p50_ms, books.lag_p99_ms)
            else {
                bail!("{sku}: the books have no rate or lag: {books:?}");
            };
            runs.push([orders_per_s, tally.rps()]);
            lags.push([p50, p99]);
        }
        let figures = OrdersVsSales {
            lag_p50_ms: report::median(lags.iter().map(|lag| lag[0]).collect()),
            lag_p99_ms: report::median(lags.iter().map(|lag| lag[1]).collect()),
            lag_runs_ms: lags,
        };
        self.add(
            Row::new("orders-vs-sales", ["orders", "lua-stream sales"], runs, Some(GOAL)).with_note(
                format!(
                    "{UNITS} units sold per run with lua-stream at {} connections; from sale to order row \
                     (median of the runs): lag p50 {:.0} ms, p99 {:.0} ms (goal <= {GOAL_LAG_P99_MS:.0} ms)",
                    self.config.concurrency, figures.lag_p50_ms, figures.lag_p99_ms
                ),
            ),
        );
        self.report.orders_vs_sales = Some(figures);
        Ok(())
    }

    /// Sells the SKU of `path` out: [`UNITS`] requests, every one a sale.
    async fn sold_all(&self, path: &str) -> anyhow::Result<Tally> {
        let plan = Plan {
            method: Method::GET,
            paths: vec![path.to_owned()],
            concurrency: self.config.concurrency,
            requests: Some(UNITS),
            duration: None,
            rate: None,
            timeout: Duration::from_secs(30),
            history: None,
        };
        let tally = engine::run(&self.target, &plan, &Progress::default()).await;
        super::side::all_200(path, &tally)?;
        Ok(tally)
    }
}
