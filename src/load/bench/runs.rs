//! How a bench measures: one run of our engine on a path (with its CPU,
//! when watched), the rows' bookkeeping, the processes whose CPU is watched,
//! the instances behind the target and their resident memory.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::bail;
use hyper::Method;

use super::cpu::{self, Kind, Usage, Watched};
use super::report::{InstanceMemory, Row, Skipped};
use super::{Bench, RowName};
use crate::load::engine::{self, Plan, Progress, Tally};

impl Bench {
    /// One run of our engine on `path`; every request must be answered.
    pub(super) async fn ours(&self, path: &str) -> anyhow::Result<Tally> {
        self.ours_at(path, self.config.concurrency).await
    }

    /// [`ours`](Self::ours) with `concurrency` requests in flight.
    pub(super) async fn ours_at(&self, path: &str, concurrency: usize) -> anyhow::Result<Tally> {
        let plan = Plan {
            method: Method::GET,
            paths: vec![path.to_owned()],
            concurrency,
            requests: None,
            duration: Some(self.config.duration),
            rate: None,
            timeout: Duration::from_secs(30),
            history: None,
        };
        let tally = engine::run(&self.target, &plan, &Progress::default()).await;
        let failed = tally.errors.total();
        if failed > 0 {
            bail!(
                "{failed} of {} requests to {path} failed: {:?}",
                tally.requests,
                tally.errors
            );
        }
        Ok(tally)
    }

    pub(super) async fn rps(&self, path: &str) -> anyhow::Result<f64> {
        Ok(self.ours(path).await?.rps())
    }

    /// One run of our engine on `path`, its CPU added to `usage`.
    pub(super) async fn measured(
        &self,
        path: &str,
        watched: &Watched,
        usage: &mut Usage,
    ) -> anyhow::Result<Tally> {
        let before = cpu::sample(watched);
        let started = Instant::now();
        let tally = self.ours(path).await?;
        usage.add(
            &before,
            &cpu::sample(watched),
            started.elapsed().as_secs_f64(),
            tally.requests,
        );
        Ok(tally)
    }

    /// Whether `--rows` asks for this row (no `--rows`: every row).
    pub(super) fn wants(&self, row: RowName) -> bool {
        self.config.rows.is_empty() || self.config.rows.contains(&row)
    }

    pub(super) fn add(&mut self, row: Row) {
        println!("{}", row.line());
        self.report.rows.push(row);
    }

    pub(super) fn skip(&mut self, row: &str, why: &str) {
        println!("{row}: skipped, {why}");
        self.report.skipped.push(Skipped {
            row: row.to_owned(),
            why: why.to_owned(),
        });
    }

    /// The processes whose CPU is watched: the instances (their pids from
    /// `/healthz`), whatever listens on the target (nginx's master and
    /// workers), Redis (its own pid) and this process. Only processes that
    /// run on this machine count.
    pub(super) async fn watched(&mut self) -> anyhow::Result<Watched> {
        let instances: Vec<u32> = self
            .instances()
            .await?
            .into_values()
            .filter(|&pid| cpu::runs_here(pid, "stocklock"))
            .collect();
        let me = std::process::id();
        let front = cpu::listeners(self.target.addr)
            .into_iter()
            .filter(|pid| *pid != me && !instances.contains(pid))
            .collect();
        let redis = self
            .redis
            .pid()
            .await?
            .filter(|&pid| cpu::runs_here(pid, "redis-server"));
        Ok(Watched(BTreeMap::from([
            (Kind::Instances, instances),
            (Kind::Nginx, front),
            (Kind::Redis, redis.into_iter().collect()),
            (Kind::Generator, vec![me]),
        ])))
    }

    /// The instances behind the target and their pids, found by asking
    /// `/healthz` until every one has answered (nginx takes turns).
    pub(super) async fn instances(&self) -> anyhow::Result<BTreeMap<String, u32>> {
        let mut seen = BTreeMap::new();
        for _ in 0..32 {
            let health = self.client.health().await?;
            seen.insert(health.instance, health.pid);
        }
        Ok(seen)
    }

    /// The resident memory of each instance after all the rows.
    pub(super) async fn memory(&mut self) -> anyhow::Result<()> {
        for (instance, pid) in self.instances().await? {
            let resident_mib = cpu::runs_here(pid, "stocklock")
                .then(|| resident_kib(pid))
                .flatten()
                .map(|kib| kib as f64 / 1024.0);
            match resident_mib {
                Some(mib) => {
                    println!("instance {instance} (pid {pid}): resident memory {mib:.1} MiB")
                }
                None => println!(
                    "instance {instance} (pid {pid}): resident memory unknown (not on this machine?)"
                ),
            }
            self.report.instances.push(InstanceMemory {
                instance,
                pid,
                resident_mib,
            });
        }
        Ok(())
    }
}

/// `VmRSS` of a process, in KiB.
fn resident_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
