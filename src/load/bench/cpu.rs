//! Where the CPU goes during a row's side: each watched process's CPU time
//! (utime + stime in /proc/PID/stat, its threads included) and the
//! machine's (/proc/stat), read before and after, as shares of one core.
//!
//! Both count in the kernel's USER_HZ ticks, so a share needs no clock
//! rate: a process's ticks over the machine's ticks per core in the same
//! window. The machine has `cores` × 100 % of one core; what the watched
//! processes did not use was used by everything else (other processes, the
//! kernel's own threads) or idle. Linux only; elsewhere nothing is found.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use serde::Serialize;

/// The kinds of process a stack is made of, and the generator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Instances,
    Nginx,
    Redis,
    Generator,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Instances, Kind::Nginx, Kind::Redis, Kind::Generator];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Instances => "instances",
            Kind::Nginx => "nginx",
            Kind::Redis => "redis",
            Kind::Generator => "generator",
        }
    }
}

/// The processes watched, by kind (a kind may have none: not found here).
#[derive(Clone, Debug, Default)]
pub struct Watched(pub BTreeMap<Kind, Vec<u32>>);

impl Watched {
    fn pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.values().flatten().copied()
    }
}

/// CPU ticks at one instant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// utime + stime of each watched process that exists.
    pub processes: BTreeMap<u32, u64>,
    pub machine: MachineTicks,
}

/// The machine's ticks over all its cores, from /proc/stat's `cpu` line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MachineTicks {
    /// user, nice, system, irq, softirq.
    pub busy: u64,
    /// idle and iowait.
    pub idle: u64,
    /// Taken by the hypervisor for other guests.
    pub steal: u64,
}

impl MachineTicks {
    fn total(&self) -> u64 {
        self.busy + self.idle + self.steal
    }
}

/// What the watched processes and the machine used over some windows,
/// and how many answers the generator got meanwhile.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Usage {
    processes: BTreeMap<u32, u64>,
    machine: MachineTicks,
    seconds: f64,
    answers: u64,
}

impl Usage {
    /// Adds the window from `before` to `after`, `seconds` long, in which
    /// `answers` came. A process missing from either sample (it ended, or
    /// restarted under another pid) adds nothing.
    pub fn add(&mut self, before: &Sample, after: &Sample, seconds: f64, answers: u64) {
        for (pid, ticks) in &after.processes {
            if let Some(earlier) = before.processes.get(pid) {
                *self.processes.entry(*pid).or_default() += ticks.saturating_sub(*earlier);
            }
        }
        let (b, a) = (before.machine, after.machine);
        self.machine.busy += a.busy.saturating_sub(b.busy);
        self.machine.idle += a.idle.saturating_sub(b.idle);
        self.machine.steal += a.steal.saturating_sub(b.steal);
        self.seconds += seconds;
        self.answers += answers;
    }

    /// Adds the windows of `other`.
    pub fn merge(&mut self, other: &Usage) {
        for (pid, ticks) in &other.processes {
            *self.processes.entry(*pid).or_default() += ticks;
        }
        let (m, o) = (&mut self.machine, &other.machine);
        (m.busy, m.idle, m.steal) = (m.busy + o.busy, m.idle + o.idle, m.steal + o.steal);
        self.seconds += other.seconds;
        self.answers += other.answers;
    }
}

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

/// utime + stime from the text of /proc/PID/stat. The command name (field
/// 2) may hold spaces and parentheses, so fields count from its last `)`.
pub fn process_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime and stime are fields 14 and 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The machine's ticks and its number of cores from the text of /proc/stat.
pub fn machine_ticks(stat: &str) -> Option<(MachineTicks, usize)> {
    let mut lines = stat.lines();
    let total = lines.next()?.strip_prefix("cpu ")?;
    let v: Vec<u64> = total
        .split_whitespace()
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal (guest is within user).
    let field = |i: usize| v.get(i).copied().unwrap_or(0);
    let ticks = MachineTicks {
        busy: field(0) + field(1) + field(2) + field(5) + field(6),
        idle: field(3) + field(4),
        steal: field(7),
    };
    let cores = lines
        .take_while(|line| line.starts_with("cpu"))
        .filter(|line| line.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count();
    Some((ticks, cores))
}

/// The machine's cores, as /proc/stat counts them.
pub fn cores() -> usize {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|stat| machine_ticks(&stat))
        .map(|(_, cores)| cores)
        .filter(|&cores| cores > 0)
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
}

/// Reads the ticks of the watched processes and of the machine now.
pub fn sample(watched: &Watched) -> Sample {
    let processes = watched
        .pids()
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            Some((pid, process_ticks(&stat)?))
        })
        .collect();
    let machine = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|stat| machine_ticks(&stat))
        .map(|(ticks, _)| ticks)
        .unwrap_or_default();
    Sample { processes, machine }
}

/// Whether `pid` runs here as a program whose name starts with `name`
/// (a pid an API reports may belong to another machine or container).
pub fn runs_here(pid: u32, name: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|comm| comm.trim_end().starts_with(name))
}

/// The processes listening on `addr`'s port, at `addr` or every address
/// (nginx's master and its workers all hold the listening socket).
pub fn listeners(addr: SocketAddr) -> Vec<u32> {
    let any: IpAddr = match addr.ip() {
        IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter(|&pid| {
            crate::os::listens_on(pid, addr)
                || crate::os::listens_on(pid, SocketAddr::new(any, addr.port()))
        })
        .collect();
    pids.sort_unstable();
    pids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_stat_gives_utime_plus_stime_whatever_its_name() {
        let stat = "4242 (nginx: worker (a) b) S 4200 4200 4200 0 -1 4194624 120 0 0 0 731 269 0 0 20 0 1 0 1234 10000000 300 18446744073709551615";
        assert_eq!(process_ticks(stat), Some(731 + 269));
        assert_eq!(process_ticks("4242 (short) S 1 2"), None);
    }

    #[test]
    fn the_machine_line_splits_busy_idle_and_steal_and_counts_cores() {
        let stat = "cpu  100 10 50 800 40 5 15 30 7 0\ncpu0 50 5 25 400 20 2 8 15 3 0\ncpu1 50 5 25 400 20 3 7 15 4 0\nintr 1 2 3\nctxt 99\n";
        let (ticks, cores) = machine_ticks(stat).unwrap();
        assert_eq!(
            ticks,
            MachineTicks {
                busy: 100 + 10 + 50 + 5 + 15,
                idle: 800 + 40,
                steal: 30,
            }
        );
        assert_eq!(cores, 2);
    }

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

    #[test]
    fn this_process_is_found_and_its_ticks_are_read() {
        let me = std::process::id();
        let watched = Watched(BTreeMap::from([(Kind::Generator, vec![me])]));
        let now = sample(&watched);
        assert!(now.processes.contains_key(&me));
        assert!(now.machine.busy + now.machine.idle > 0);
        assert!(cores() >= 1);
    }
}
