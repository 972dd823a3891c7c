//! The shares themselves: each kind's CPU over the windows measured, in
//! percent of one core and per answer, and the line that prints them.

use serde::Serialize;

use super::{Kind, Usage, Watched};

/// The CPU shares over the windows measured, in percent of one core.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CpuShares {
    /// The windows' wall time, summed.
    pub seconds: f64,
    /// The answers the generator got in them.
    pub answers: u64,
    pub cores: usize,
    /// One entry per kind, in [`Kind::ALL`]'s order.
    pub processes: Vec<Share>,
    /// What the machine did besides the watched processes.
    pub everything_else_percent_of_one_core: f64,
    pub idle_percent_of_one_core: f64,
}

/// One kind's share.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Share {
    pub kind: String,
    /// The processes counted (none: not found on this machine).
    pub pids: Vec<u32>,
    /// `None` when no process of the kind was found.
    pub percent_of_one_core: Option<f64>,
    /// CPU time per answer, in microseconds: what one answer cost the kind.
    pub cpu_usec_per_answer: Option<f64>,
}

/// Each kind's share of `usage`, in percent of one core of a machine of
/// `cores` cores.
pub fn shares(watched: &Watched, usage: &Usage, cores: usize) -> CpuShares {
    let cores = cores.max(1);
    let per_core = usage.machine.total() as f64 / cores as f64;
    let percent = |ticks: u64| {
        if per_core > 0.0 {
            ticks as f64 * 100.0 / per_core
        } else {
            0.0
        }
    };
    let mut counted = 0;
    let processes = Kind::ALL
        .iter()
        .map(|kind| {
            let pids = watched.0.get(kind).cloned().unwrap_or_default();
            let ticks: u64 = pids.iter().filter_map(|pid| usage.processes.get(pid)).sum();
            counted += ticks;
            let found = !pids.is_empty();
            // percent of one core × seconds = CPU seconds.
            let cpu_seconds = percent(ticks) / 100.0 * usage.seconds;
            Share {
                kind: kind.name().to_owned(),
                percent_of_one_core: found.then(|| percent(ticks)),
                cpu_usec_per_answer: (found && usage.answers > 0)
                    .then(|| cpu_seconds * 1e6 / usage.answers as f64),
                pids,
            }
        })
        .collect();
    CpuShares {
        seconds: usage.seconds,
        answers: usage.answers,
        cores,
        processes,
        // Ticks are counted at different instants for processes and the
        // machine: a few may go missing either way; never below zero.
        everything_else_percent_of_one_core: percent(usage.machine.busy.saturating_sub(counted)),
        idle_percent_of_one_core: percent(usage.machine.idle),
    }
}

impl CpuShares {
    /// CPU per answer of the instances and Redis together, in microseconds:
    /// what the sale itself costs, without nginx and the generator.
    pub fn stack_usec_per_answer(&self) -> f64 {
        let stack = |share: &&Share| share.kind == "instances" || share.kind == "redis";
        let usec = self.processes.iter().filter(stack);
        usec.filter_map(|share| share.cpu_usec_per_answer).sum()
    }

    /// One line: `instances 78 % (52 us per answer), nginx 41 % (...), ...`.
    pub fn line(&self) -> String {
        self.line_for("the lua sides")
    }

    /// [`line`](Self::line) for the windows `what` names.
    pub fn line_for(&self, what: &str) -> String {
        let mut parts: Vec<String> = self
            .processes
            .iter()
            .map(
                |share| match (share.percent_of_one_core, share.cpu_usec_per_answer) {
                    (Some(percent), Some(usec)) => {
                        format!("{} {percent:.0} % ({usec:.1} us per answer)", share.kind)
                    }
                    (Some(percent), None) => format!("{} {percent:.0} %", share.kind),
                    (None, _) => format!("{} not found", share.kind),
                },
            )
            .collect();
        parts.push(format!(
            "everything else {:.0} %",
            self.everything_else_percent_of_one_core
        ));
        parts.push(format!("idle {:.0} %", self.idle_percent_of_one_core));
        format!(
            "CPU during {what} ({:.1} s, {} answers; {} cores = {} %), in % of one core: {}",
            self.seconds,
            self.answers,
            self.cores,
            self.cores * 100,
            parts.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::load::bench::cpu::{MachineTicks, Sample};

    fn ticks_at(processes: &[(u32, u64)], busy: u64, idle: u64) -> Sample {
        Sample {
            processes: processes.iter().copied().collect(),
            machine: MachineTicks {
                busy,
                idle,
                steal: 0,
            },
        }
    }

    #[test]
    fn shares_are_percent_of_one_core_over_every_window() {
        // Two cores; two windows of 1 s each at 100 ticks per core-second:
        // 400 machine ticks, 200 per core.
        let watched = Watched(BTreeMap::from([
            (Kind::Instances, vec![10, 11]),
            (Kind::Nginx, vec![20]),
            (Kind::Redis, vec![30]),
            (Kind::Generator, vec![40]),
        ]));
        let mut usage = Usage::default();
        usage.add(
            &ticks_at(&[(10, 0), (11, 0), (20, 0), (30, 0), (40, 0)], 0, 0),
            &ticks_at(&[(10, 40), (11, 38), (20, 40), (30, 30), (40, 35)], 190, 10),
            1.0,
            600,
        );
        // The second window: instance 11 restarted under another pid (gone),
        // the machine counts on.
        usage.add(
            &ticks_at(&[(10, 40), (11, 38), (20, 40), (30, 30), (40, 35)], 190, 10),
            &ticks_at(&[(10, 118), (20, 82), (30, 60), (40, 70)], 380, 20),
            1.0,
            400,
        );
        let shares = shares(&watched, &usage, 2);
        let by_kind: Vec<(&str, Option<f64>)> = shares
            .processes
            .iter()
            .map(|s| (s.kind.as_str(), s.percent_of_one_core))
            .collect();
        // instances: (40 + 38) + 78 = 156 ticks of 200 per core = 78 %.
        assert_eq!(
            by_kind,
            vec![
                ("instances", Some(78.0)),
                ("nginx", Some(41.0)),
                ("redis", Some(30.0)),
                ("generator", Some(35.0)),
            ]
        );
        assert_eq!((shares.seconds, shares.answers), (2.0, 1000));
        // 78 % of one core for 2 s is 1.56 CPU seconds, over 1000 answers.
        let per_answer: Vec<f64> = shares
            .processes
            .iter()
            .map(|s| s.cpu_usec_per_answer.unwrap())
            .collect();
        assert_eq!(per_answer, [1560.0, 820.0, 600.0, 700.0]);
        // Busy 380 ticks, 156 + 82 + 60 + 70 = 368 of them watched.
        assert_eq!(shares.everything_else_percent_of_one_core, 6.0);
        assert_eq!(shares.idle_percent_of_one_core, 10.0);
        assert_eq!(
            shares.line(),
            "CPU during the lua sides (2.0 s, 1000 answers; 2 cores = 200 %), in % of one core: \
             instances 78 % (1560.0 us per answer), nginx 41 % (820.0 us per answer), \
             redis 30 % (600.0 us per answer), generator 35 % (700.0 us per answer), \
             everything else 6 %, idle 10 %"
        );
    }

    #[test]
    fn a_kind_not_found_has_no_share_and_nothing_is_negative() {
        let watched = Watched(BTreeMap::from([(Kind::Generator, vec![40])]));
        let mut usage = Usage::default();
        // The process's ticks were read after the machine's: more than the
        // machine's busy ticks.
        usage.add(
            &ticks_at(&[(40, 0)], 0, 0),
            &ticks_at(&[(40, 12)], 10, 90),
            1.0,
            0,
        );
        let shares = shares(&watched, &usage, 1);
        assert_eq!(shares.processes[0].percent_of_one_core, None);
        assert!(shares.processes[0].pids.is_empty());
        assert_eq!(shares.processes[3].percent_of_one_core, Some(12.0));
        // No answers: no cost per answer.
        assert_eq!(shares.processes[3].cpu_usec_per_answer, None);
        assert_eq!(shares.everything_else_percent_of_one_core, 0.0);
        assert!(shares.line().contains("instances not found"));
    }
}
