//! Row `pg-batch-vs-update`: one hot SKU sold by `pg-batch` (a queue's
//! buyers decided in one transaction) against `pg-update` (a transaction
//! a buyer), in turn, with PostgreSQL's CPU per answer of each and, from
//! `pg_stat_statements`, the time each statement took per sale: where the
//! database spends a sale, and what batching saves of it. Skipped on a
//! stack whose instances have no PostgreSQL; without `--postgres-url` it
//! shows the rates only.

use super::pg::{postgres_addr, postgres_pids, ticks, usec_per_answer};
use super::*;

const NAME: &str = "pg-batch-vs-update";

/// The hot SKUs, one a side.
const BATCH: &str = "bench-pg-batch";
const UPDATE: &str = "bench-pg-batch-update";

/// The goals of the row (issue: the hot row at its floor): `pg-batch` at
/// least this many times `pg-update`'s sales a second, at most this much
/// of PostgreSQL's CPU a sale.
const GOAL_RATIO: f64 = 5.0;
const GOAL_USEC: f64 = 60.0;

/// How many statements of each side the note names (the costliest).
const STATEMENTS: usize = 3;

impl Bench {
    pub(super) async fn pg_batch_row(&mut self) -> anyhow::Result<()> {
        let sides = [
            format!("/deductStock/pg-batch?sku={BATCH}"),
            format!("/deductStock/pg-update?sku={UPDATE}"),
        ];
        for (sku, path) in [BATCH, UPDATE].into_iter().zip(&sides) {
            if let Err(err) = self.client.reset(sku, PLENTY, 0).await {
                self.skip(NAME, &format!("the stack refused a reset ({err:#})"));
                return Ok(());
            }
            let (status, body) = self.client.get(path).await;
            if status != 200 {
                let why =
                    format!("{path} answered {status} {body}: start the stack with PostgreSQL");
                self.skip(NAME, &why);
                return Ok(());
            }
        }
        let (db, addr) = match &self.config.postgres_url {
            Some(url) => (
                Some(crate::orders::connect(url).await?),
                Some(postgres_addr(url)?),
            ),
            None => (None, None),
        };
        let mut rates = vec![[0.0; 2]; self.config.runs];
        let mut cost: [Vec<f64>; 2] = Default::default();
        let mut statements: [Vec<String>; 2] = Default::default();
        for (round, rate) in rates.iter_mut().enumerate() {
            for k in 0..2 {
                let i = (round + k) % 2;
                if let Some(db) = &db {
                    db.batch_execute("SELECT pg_stat_statements_reset()")
                        .await?;
                }
                let pids = || addr.map(postgres_pids).unwrap_or_default();
                let before = ticks(&pids());
                let tally = self.spread(std::slice::from_ref(&sides[i])).await?;
                let after = ticks(&pids());
                super::side::all_200(&sides[i], &tally)?;
                rate[i] = tally.rps();
                if addr.is_some() {
                    cost[i].push(usec_per_answer(&before, &after, tally.requests));
                }
                // The last round's statements: each side's costliest.
                if let Some(db) = &db {
                    statements[i] = per_sale(db, tally.requests).await?;
                }
            }
        }
        let usec = |runs: &Vec<f64>| (!runs.is_empty()).then(|| report::median(runs.clone()));
        let (batch_us, update_us) = (usec(&cost[0]), usec(&cost[1]));
        let shown =
            |v: Option<f64>| v.map_or("- (no --postgres-url)".to_owned(), |v| format!("{v:.1} us"));
        let cpu_goal = match batch_us {
            Some(v) if v <= GOAL_USEC => format!("met ({v:.1} <= {GOAL_USEC})"),
            Some(v) => format!("NOT met ({v:.1} > {GOAL_USEC})"),
            None => "not measured".to_owned(),
        };
        let said = |i: usize| match statements[i].is_empty() {
            true => "-".to_owned(),
            false => statements[i].join("; "),
        };
        self.add(
            Row::new(NAME, ["pg-batch", "pg-update"], rates, Some(GOAL_RATIO)).with_note(format!(
                "one hot SKU each, {} connections; PostgreSQL's CPU per sale {} (pg-batch) vs {} (pg-update), \
                 goal <= {GOAL_USEC} us: {cpu_goal}. Time per sale by statement (pg_stat_statements, last \
                 round): pg-batch {}; pg-update {}",
                self.config.concurrency,
                shown(batch_us),
                shown(update_us),
                said(0),
                said(1),
            )),
        );
        Ok(())
    }
}

/// The costliest statements since the last reset of `pg_stat_statements`,
/// each as its time per sale (`sales`), its calls per sale and its first
/// words.
async fn per_sale(db: &crate::orders::Client, sales: u64) -> anyhow::Result<Vec<String>> {
    let rows = db
        .query(
            "SELECT query, calls, total_exec_time FROM pg_stat_statements
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND query NOT LIKE '%pg_stat_statements%'
             ORDER BY total_exec_time DESC LIMIT $1",
            &[&(STATEMENTS as i64)],
        )
        .await
        .context("cannot read pg_stat_statements (is it in shared_preload_libraries?)")?;
    let sales = sales.max(1) as f64;
    Ok(rows
        .iter()
        .map(|row| {
            let (query, calls, ms): (String, i64, f64) = (row.get(0), row.get(1), row.get(2));
            let words: Vec<&str> = query.split_whitespace().take(6).collect();
            format!(
                "{:.1} us x{:.2} `{}`",
                ms * 1000.0 / sales,
                calls as f64 / sales,
                words.join(" ")
            )
        })
        .collect())
}
