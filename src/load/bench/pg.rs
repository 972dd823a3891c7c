//! Rows `pg-update-vs-lua` and `pg-update-many-skus`: the database as the
//! stock's guard, against Redis, and what its hot row costs.
//!
//! `pg-update-vs-lua` sells one hot SKU with `pg-update` (one conditional
//! `UPDATE` a sale) and with `lua` (one script a sale), in turn, and
//! measures beside each rate the CPU per answer of the store that decided
//! it: PostgreSQL's processes (its postmaster and every backend, found
//! from `--postgres-url`'s port) for `pg-update`, Redis for `lua`.
//! `pg-update-many-skus` spreads the same load over [`SKUS`] SKUs against
//! the one hot SKU: what the row lock's queue costs. Skipped on a stack
//! whose instances have no PostgreSQL.

use super::pg_figures::PgFigures;
use std::net::SocketAddr;

use super::*;

/// The SKUs `pg-update-many-skus` spreads its load over.
const SKUS: usize = 64;

/// The clock ticks of /proc/PID/stat a second (`USER_HZ`, which Linux
/// keeps at 100 whatever its scheduler's rate).
const USER_HZ: f64 = 100.0;

/// The one hot SKU of `pg-update`.
pub(super) const PG_SKU: &str = "bench-pg-update";

impl Bench {
    pub(super) async fn pg_rows(&mut self) -> anyhow::Result<()> {
        let names = ["pg-update-vs-lua", "pg-update-many-skus"];
        let hot = format!("/deductStock/pg-update?sku={PG_SKU}");
        if let Err(err) = self.client.reset(PG_SKU, PLENTY, 0).await {
            for name in names {
                self.skip(name, &format!("the stack refused a reset ({err:#})"));
            }
            return Ok(());
        }
        let (status, body) = self.client.get(&hot).await;
        if status != 200 {
            let why = format!(
                "pg-update answered {status} {body}: start the stack with PostgreSQL (`up`, not `--orders off`)"
            );
            for name in names {
                self.skip(name, &why);
            }
            return Ok(());
        }
        let many: Vec<String> = (0..SKUS).map(|k| format!("bench-pg-update-{k}")).collect();
        for sku in &many {
            self.client.reset(sku, PLENTY, 0).await?;
        }
        let many: Vec<String> = many
            .iter()
            .map(|sku| format!("/deductStock/pg-update?sku={sku}"))
            .collect();
        let lua = format!("/deductStock/lua?sku={LUA_SKU}");
        let postgres = match &self.config.postgres_url {
            Some(url) => Some(postgres_addr(url)?),
            None => None,
        };
        let redis_pid = self
            .redis
            .pid()
            .await?
            .filter(|&pid| cpu::runs_here(pid, "redis-server"));
        // Three sides in turn, each round starting with the next.
        let sides: [Vec<String>; 3] = [vec![hot], vec![lua], many];
        let mut rates = vec![[0.0; 3]; self.config.runs];
        let mut cost: [Vec<f64>; 3] = Default::default();
        let mut p99: [Vec<f64>; 3] = Default::default();
        for (round, rate) in rates.iter_mut().enumerate() {
            for k in 0..3 {
                let i = (round + k) % 3;
                // The store that decides the side's sales: Redis for lua.
                let pids = || match i {
                    1 => redis_pid.into_iter().collect(),
                    _ => postgres.map(postgres_pids).unwrap_or_default(),
                };
                let measured = if i == 1 {
                    redis_pid.is_some()
                } else {
                    postgres.is_some()
                };
                let before = ticks(&pids());
                let tally = self.spread(&sides[i]).await?;
                // Read again: a backend opened during the side counts whole.
                let after = ticks(&pids());
                super::side::all_200(&sides[i][0], &tally)?;
                rate[i] = tally.rps();
                if measured {
                    cost[i].push(usec_per_answer(&before, &after, tally.requests));
                }
                p99[i].push(super::side::quantile_us(&tally, 0.99));
            }
        }
        let median_of = |runs: &Vec<f64>| (!runs.is_empty()).then(|| report::median(runs.clone()));
        let figures = PgFigures {
            postgres_usec_per_answer: median_of(&cost[0]),
            postgres_usec_runs: cost[0].clone(),
            redis_usec_per_answer: median_of(&cost[1]),
            redis_usec_runs: cost[1].clone(),
            postgres_usec_per_answer_many_skus: median_of(&cost[2]),
            p99_us: [0, 1, 2].map(|i| report::median(p99[i].clone())),
        };
        let usec =
            |v: Option<f64>| v.map_or("- (no --postgres-url)".to_owned(), |v| format!("{v:.1} us"));
        self.add(
            Row::new("pg-update-vs-lua", ["pg-update", "lua"], rates.iter().map(|r| [r[0], r[1]]).collect(), None)
                .with_note(format!(
                    "one hot SKU, {} connections; CPU per answer: PostgreSQL {} (pg-update), Redis {} (lua); \
                     p99 {:.1} ms vs {:.1} ms. For context, published on bigger machines: one hot row under \
                     FOR UPDATE NOWAIT about 6 000 decrements/s on 32 cores; AliSQL's hot-row hint 12 000-31 000 \
                     TPS on 90 cores; PolarDB a few hundred TPS on one contended row without its batching",
                    self.config.concurrency,
                    usec(figures.postgres_usec_per_answer),
                    figures.redis_usec_per_answer.map_or("-".to_owned(), |v| format!("{v:.1} us")),
                    figures.p99_us[0] / 1000.0,
                    figures.p99_us[1] / 1000.0,
                )),
        );
        self.add(
            Row::new(
                "pg-update-many-skus",
                ["pg-update, 64 SKUs", "pg-update, 1 SKU"],
                rates.iter().map(|r| [r[2], r[0]]).collect(),
                None,
            )
            .with_note(format!(
                "the same load over {SKUS} SKUs (each its own row) against one hot row; CPU per answer: \
                 PostgreSQL {} vs {}; p99 {:.1} ms vs {:.1} ms",
                usec(figures.postgres_usec_per_answer_many_skus),
                usec(figures.postgres_usec_per_answer),
                figures.p99_us[2] / 1000.0,
                figures.p99_us[0] / 1000.0,
            )),
        );
        self.report.postgres = Some(figures);
        Ok(())
    }

    /// One run of the bench's length over `paths` (the generator spreads
    /// its requests over them).
    pub(super) async fn spread(&self, paths: &[String]) -> anyhow::Result<Tally> {
        let plan = Plan {
            method: Method::GET,
            paths: paths.to_vec(),
            concurrency: self.config.concurrency,
            requests: None,
            duration: Some(self.config.duration),
            rate: None,
            timeout: Duration::from_secs(30),
            history: None,
        };
        Ok(engine::run(&self.target, &plan, &Progress::default()).await)
    }
}

/// The address PostgreSQL listens on, from its URL.
pub(super) fn postgres_addr(url: &str) -> anyhow::Result<SocketAddr> {
    let config: tokio_postgres::Config = url
        .parse()
        .with_context(|| format!("bad PostgreSQL URL {}", crate::orders::shown(url)))?;
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        _ => "127.0.0.1".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let ip = if host == "localhost" {
        "127.0.0.1".to_owned()
    } else {
        host
    };
    format!("{ip}:{port}")
        .parse()
        .with_context(|| format!("PostgreSQL's host is not an IP address: {ip}"))
}

/// PostgreSQL's postmaster listening on `addr`, and its children (the
/// backends, one per connection, and the background processes).
pub(super) fn postgres_pids(addr: SocketAddr) -> Vec<u32> {
    let postmasters: Vec<u32> = cpu::listeners(addr)
        .into_iter()
        .filter(|&pid| cpu::runs_here(pid, "postgres"))
        .collect();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return postmasters;
    };
    let mut pids = postmasters.clone();
    for pid in entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
    {
        let parent = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| parent_pid(&stat));
        if parent.is_some_and(|parent| postmasters.contains(&parent)) {
            pids.push(pid);
        }
    }
    pids
}

/// The parent's pid from the text of /proc/PID/stat (field 4).
fn parent_pid(stat: &str) -> Option<u32> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Each process's CPU ticks now.
pub(super) fn ticks(pids: &[u32]) -> BTreeMap<u32, u64> {
    pids.iter()
        .filter_map(|&pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            Some((pid, cpu::process_ticks(&stat)?))
        })
        .collect()
}

/// The CPU the processes of `after` spent since `before` (a process not
/// in `before` started since: all of its ticks), per answer, in µs.
pub(super) fn usec_per_answer(
    before: &BTreeMap<u32, u64>,
    after: &BTreeMap<u32, u64>,
    answers: u64,
) -> f64 {
    let spent: u64 = after
        .iter()
        .map(|(pid, t)| t.saturating_sub(before.get(pid).copied().unwrap_or(0)))
        .sum();
    spent as f64 * 1e6 / USER_HZ / answers.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_is_read_past_a_name_with_spaces_and_parentheses() {
        let stat = "4242 (postgres: x (y) idle) S 17 4242 4242 0 -1 4194560 0 0 0 0 3 4";
        assert_eq!(parent_pid(stat), Some(17));
    }

    #[test]
    fn a_process_started_during_the_side_counts_whole() {
        let before = BTreeMap::from([(1, 100), (2, 50)]);
        let after = BTreeMap::from([(1, 150), (2, 50), (3, 20)]);
        let usec = usec_per_answer(&before, &after, 10);
        let per_tick = 1e6 / USER_HZ;
        assert!((usec - 70.0 * per_tick / 10.0).abs() < 1e-6, "{usec}");
    }
}
