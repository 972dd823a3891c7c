//! Row `pg-update-sync-off-vs-on`: what the WAL flush costs one hot row.
//! `pg-update` sells the hot SKU with the server's `synchronous_commit`
//! off, then on (`up`'s setting: a sale answered is on disk), in turn,
//! switched live through `--postgres-url` (`ALTER SYSTEM`, then a reload
//! every backend takes at its next statement), with PostgreSQL's CPU per
//! answer beside each rate. The setting is put back to `on` however the
//! row ends. Skipped without `--postgres-url` or without `pg-update`.

use super::pg::{PG_SKU, postgres_addr, postgres_pids, ticks, usec_per_answer};
use super::*;

const NAME: &str = "pg-update-sync-off-vs-on";

impl Bench {
    pub(super) async fn pg_sync_row(&mut self) -> anyhow::Result<()> {
        let Some(url) = self.config.postgres_url.clone() else {
            self.skip(
                NAME,
                "it switches the server's synchronous_commit: give --postgres-url",
            );
            return Ok(());
        };
        let hot = format!("/deductStock/pg-update?sku={PG_SKU}");
        if let Err(err) = self.client.reset(PG_SKU, PLENTY, 0).await {
            self.skip(NAME, &format!("the stack refused a reset ({err:#})"));
            return Ok(());
        }
        let (status, body) = self.client.get(&hot).await;
        if status != 200 {
            self.skip(NAME, &format!("pg-update answered {status} {body}"));
            return Ok(());
        }
        let db = crate::orders::connect(&url).await?;
        let addr = postgres_addr(&url)?;
        let played = self.sync_sides(&db, addr, &hot).await;
        // On, as up set it, whatever happened.
        set_sync(&db, true).await?;
        let (rates, cost) = played?;
        let median = |v: &Vec<f64>| report::median(v.clone());
        self.add(
            Row::new(NAME, ["synchronous_commit off", "on"], rates, None).with_note(format!(
                "one hot SKU by pg-update, {} connections; PostgreSQL's CPU per answer {:.1} us off, \
                 {:.1} us on: the difference is each commit waiting for its WAL to reach the disk \
                 (up keeps it on: a sale answered survives a crash of the database)",
                self.config.concurrency,
                median(&cost[0]),
                median(&cost[1]),
            )),
        );
        Ok(())
    }

    /// The two sides in turn, each round starting with the other: each
    /// round's rates, and each side's CPU per answer.
    async fn sync_sides(
        &self,
        db: &crate::orders::Client,
        addr: std::net::SocketAddr,
        hot: &str,
    ) -> anyhow::Result<(Vec<[f64; 2]>, [Vec<f64>; 2])> {
        let mut rates = vec![[0.0; 2]; self.config.runs];
        let mut cost: [Vec<f64>; 2] = Default::default();
        let paths = [hot.to_owned()];
        for (round, rate) in rates.iter_mut().enumerate() {
            for k in 0..2 {
                let i = (round + k) % 2;
                set_sync(db, i == 1).await?;
                let before = ticks(&postgres_pids(addr));
                let tally = self.spread(&paths).await?;
                let after = ticks(&postgres_pids(addr));
                super::side::all_200(hot, &tally)?;
                rate[i] = tally.rps();
                cost[i].push(usec_per_answer(&before, &after, tally.requests));
            }
        }
        Ok((rates, cost))
    }
}

/// Sets the server's `synchronous_commit` and has every backend take it.
async fn set_sync(db: &crate::orders::Client, on: bool) -> anyhow::Result<()> {
    let value = if on { "on" } else { "off" };
    // Two statements, two calls: ALTER SYSTEM refuses a transaction block,
    // which one call of both would be.
    db.batch_execute(&format!("ALTER SYSTEM SET synchronous_commit = {value}"))
        .await
        .context("cannot switch synchronous_commit (the role must be a superuser)")?;
    db.batch_execute("SELECT pg_reload_conf()").await?;
    // A reload reaches each backend at its next statement: this session
    // says when it has it. A value set on the server's command line would
    // outrank the file ALTER SYSTEM writes: then it never comes.
    for _ in 0..50 {
        let now: String = db.query_one("SHOW synchronous_commit", &[]).await?.get(0);
        if now == value {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    anyhow::bail!(
        "the server's synchronous_commit did not become {value} (set on its command line?)"
    )
}
