//! `stocklock bench --crowd`: every variant that is safe in the race, on
//! one hot SKU of its own, at a small crowd and a large one (12 and 800
//! buyers at once by default: the generator's connections through nginx),
//! each crowd played `runs` times in turn with the other and the medians
//! kept: sales and attempts a second, the share of attempts that changed
//! nothing (busy, turned away, failed), p50 and p99, oversold (read from
//! the stack: it must be 0), and each store's CPU per answer (Redis,
//! PostgreSQL, etcd, ZooKeeper: the processes listening on the addresses
//! given). The goals are judged on the table: at the large crowd
//! `pg-batch`, `pg-advisory` and `pg-for-update` keep at least half of
//! their small crowd's sales a second, and `lua-batch` sells at least as
//! many as `lua`.

use std::net::SocketAddr;

pub use super::crowd_figures::{CrowdGoal, CrowdReport, CrowdRow, CrowdSkipped};
use super::pg::{postgres_addr, postgres_pids, ticks, usec_per_answer};
use super::*;
use crate::variants::{Behaviour, Variant};

/// The variants whose large crowd must keep this share of their small
/// crowd's sales a second.
const KEEP: [(Variant, f64); 3] = [
    (Variant::PgBatch, 0.5),
    (Variant::PgAdvisory, 0.5),
    (Variant::PgForUpdate, 0.5),
];

/// The stores whose processes are watched: each name and its addresses.
fn stores(
    config: &BenchConfig,
    redis: Option<u32>,
) -> anyhow::Result<Vec<(&'static str, Vec<u32>)>> {
    let mut stores = vec![("redis", redis.into_iter().collect())];
    if let Some(url) = &config.postgres_url {
        stores.push(("postgresql", postgres_pids(postgres_addr(url)?)));
    }
    for (name, addrs) in [("etcd", &config.etcd), ("zookeeper", &config.zookeeper)] {
        let pids: Vec<u32> = addrs
            .iter()
            .flat_map(|addr| cpu::listeners(*addr))
            .collect();
        if !pids.is_empty() {
            stores.push((name, pids));
        }
    }
    Ok(stores)
}

impl Bench {
    pub(super) async fn crowd(&mut self) -> anyhow::Result<CrowdReport> {
        let crowds = self.config.crowds.clone();
        let mut report = CrowdReport {
            crowds: crowds.clone(),
            ..CrowdReport::default()
        };
        let redis = self
            .redis
            .pid()
            .await?
            .filter(|&pid| cpu::runs_here(pid, "redis-server"));
        let picked: Vec<Variant> = match self.config.crowd_variants.is_empty() {
            true => Variant::ALL
                .into_iter()
                .filter(|v| v.about().claims.race.behaviour == Behaviour::Safe)
                .collect(),
            false => self.config.crowd_variants.clone(),
        };
        println!("{}", crowd_head());
        for variant in picked {
            let sku = format!("bench-crowd-{variant}");
            let path = format!("/deductStock/{variant}?sku={sku}");
            self.client.reset(&sku, PLENTY, variant.buckets()).await?;
            let (status, body) = self.client.get(&path).await;
            if status != 200 {
                let why = format!("{path} answered {status} {body}");
                println!("{variant}: skipped, {why}");
                report.skipped.push(CrowdSkipped {
                    variant: variant.to_string(),
                    why,
                });
                continue;
            }
            let mut tallies: Vec<Vec<(Tally, BTreeMap<String, f64>)>> =
                vec![Vec::new(); crowds.len()];
            for round in 0..self.config.runs {
                for k in 0..crowds.len() {
                    let i = (round + k) % crowds.len();
                    let before: BTreeMap<&str, _> = (stores(&self.config, redis)?.into_iter())
                        .map(|(name, pids)| (name, ticks(&pids)))
                        .collect();
                    let tally = self.crowd_run(&path, crowds[i]).await;
                    // Found again: a process started during the run (a
                    // PostgreSQL backend for a new connection) counts whole.
                    let cost = (stores(&self.config, redis)?.into_iter())
                        .map(|(name, pids)| {
                            let since = before.get(name).cloned().unwrap_or_default();
                            let spent = usec_per_answer(&since, &ticks(&pids), tally.requests);
                            (name.to_owned(), spent)
                        })
                        .collect();
                    tallies[i].push((tally, cost));
                }
            }
            let oversold = self.client.state(&sku).await?.oversold;
            for (buyers, runs) in crowds.iter().zip(tallies) {
                let row = crowd_row(variant, *buyers, &runs, oversold);
                println!("{}", crowd_line(&row));
                report.rows.push(row);
            }
        }
        report.goals = goals(&report.rows, &crowds);
        for goal in &report.goals {
            let met = if goal.met { "met" } else { "NOT met" };
            println!(
                "goal: {}: {:.2} (at least {:.2}) {met}",
                goal.goal, goal.ratio, goal.at_least
            );
        }
        Ok(report)
    }

    /// One run of the bench's length with `buyers` requests in flight.
    async fn crowd_run(&self, path: &str, buyers: usize) -> Tally {
        let plan = Plan {
            method: Method::GET,
            paths: vec![path.to_owned()],
            concurrency: buyers,
            requests: None,
            duration: Some(self.config.duration),
            rate: None,
            timeout: Duration::from_secs(30),
            history: None,
        };
        engine::run(&self.target, &plan, &Progress::default()).await
    }
}

/// The medians of one variant's runs at one crowd.
fn crowd_row(
    variant: Variant,
    buyers: usize,
    runs: &[(Tally, BTreeMap<String, f64>)],
    oversold: i64,
) -> CrowdRow {
    let median =
        |f: &dyn Fn(&Tally) -> f64| report::median(runs.iter().map(|(t, _)| f(t)).collect());
    let secs = |t: &Tally| t.elapsed.as_secs_f64().max(1e-9);
    let mut usec = BTreeMap::new();
    if let Some((_, first)) = runs.first() {
        for name in first.keys() {
            let each = runs
                .iter()
                .filter_map(|(_, cost)| cost.get(name).copied())
                .collect();
            usec.insert(name.clone(), report::median(each));
        }
    }
    CrowdRow {
        variant: variant.to_string(),
        buyers,
        sales_per_s: median(&|t| t.sold as f64 / secs(t)),
        attempts_per_s: median(&|t| t.requests as f64 / secs(t)),
        changed_nothing: median(&|t| (t.requests - t.sold) as f64 / t.requests.max(1) as f64),
        p50_ms: median(&|t| super::side::quantile_us(t, 0.5) / 1000.0),
        p99_ms: median(&|t| super::side::quantile_us(t, 0.99) / 1000.0),
        oversold,
        usec_per_answer: usec,
        runs_sales_per_s: runs.iter().map(|(t, _)| t.sold as f64 / secs(t)).collect(),
    }
}

/// The crowd table's goals, judged from its rows (a goal whose rows did
/// not run is left out).
fn goals(rows: &[CrowdRow], crowds: &[usize]) -> Vec<CrowdGoal> {
    let (Some(&small), Some(&large)) = (crowds.iter().min(), crowds.iter().max()) else {
        return Vec::new();
    };
    let sales = |v: Variant, buyers: usize| {
        rows.iter()
            .find(|r| r.variant == v.name() && r.buyers == buyers)
            .map(|r| r.sales_per_s)
    };
    let mut goals = Vec::new();
    for (v, at_least) in KEEP {
        if let (Some(few), Some(many)) = (sales(v, small), sales(v, large)) {
            let ratio = many / few.max(1e-9);
            goals.push(CrowdGoal {
                goal: format!("{v} at {large} buyers against its own {small}"),
                ratio,
                at_least,
                met: ratio >= at_least,
            });
        }
    }
    if let (Some(batch), Some(lua)) = (sales(Variant::LuaBatch, large), sales(Variant::Lua, large))
    {
        let ratio = batch / lua.max(1e-9);
        goals.push(CrowdGoal {
            goal: format!("lua-batch against lua at {large} buyers"),
            ratio,
            at_least: 1.0,
            met: ratio >= 1.0,
        });
    }
    goals
}

fn crowd_head() -> String {
    format!(
        "{:<16} {:>6} {:>9} {:>10} {:>8} {:>8} {:>9} {:>8}  CPU per answer of each store",
        "variant", "buyers", "sales/s", "attempts/s", "nothing", "p50 ms", "p99 ms", "oversold"
    )
}

fn crowd_line(row: &CrowdRow) -> String {
    let stores: Vec<String> = (row.usec_per_answer.iter())
        .filter(|(_, usec)| **usec > 0.0)
        .map(|(name, usec)| format!("{name} {usec:.1} us"))
        .collect();
    format!(
        "{:<16} {:>6} {:>9.0} {:>10.0} {:>7.1}% {:>8.1} {:>9.1} {:>8}  {}",
        row.variant,
        row.buyers,
        row.sales_per_s,
        row.attempts_per_s,
        row.changed_nothing * 100.0,
        row.p50_ms,
        row.p99_ms,
        row.oversold,
        stores.join(", ")
    )
}

/// An address of a store given on the command line (`host:port`, or an
/// etcd endpoint's URL).
pub(super) fn store_addr(text: &str) -> Result<SocketAddr, String> {
    let bare = text.trim_start_matches("http://").trim_end_matches('/');
    let bare = bare.replace("localhost", "127.0.0.1");
    bare.parse()
        .map_err(|_| format!("{text:?} is not host:port (an IP address and a port)"))
}
