//! Where the CPU goes during a row's side: each watched process's CPU time
//! (utime + stime in /proc/PID/stat, its threads included) and the
//! machine's (/proc/stat), read before and after, as shares of one core.
//!
//! Both count in the kernel's USER_HZ ticks, so a share needs no clock
//! rate: a process's ticks over the machine's ticks per core in the same
//! window. The machine has `cores` × 100 % of one core; what the watched
//! processes did not use was used by everything else (other processes, the
//! kernel's own threads) or idle. Linux only; elsewhere nothing is found.

mod share;

pub use share::{CpuShares, Share, shares};

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

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
/// (nginx's master and its workers all hold the listening socket), or on
/// IPv6 at the IPv4 address mapped.
pub fn listeners(addr: SocketAddr) -> Vec<u32> {
    let any: IpAddr = match addr.ip() {
        IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    let mut addrs = vec![addr, SocketAddr::new(any, addr.port())];
    // A JVM (ZooKeeper) listens on IPv6 sockets, an IPv4 address mapped.
    if let IpAddr::V4(v4) = addr.ip() {
        addrs.push(SocketAddr::new(v4.to_ipv6_mapped().into(), addr.port()));
    }
    let sockets = crate::os::listening_sockets(&addrs);
    if sockets.is_empty() {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter(|&pid| crate::os::holds_any(pid, &sockets))
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
