//! Where and when a measurement was taken: the date and the machine every
//! report states beside its figures.

use std::time::{SystemTime, UNIX_EPOCH};

use super::cpu;
use super::report::{self, Machine};

/// Now, in UTC (`YYYY-MM-DD HH:MM UTC`).
pub fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    report::utc_date(secs)
}

/// This machine: its cores, its CPU's model, how busy it already is.
pub fn machine() -> Machine {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("model name"))
                .and_then(|rest| rest.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let load_average_at_start = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|avg| avg.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    Machine {
        cores: cpu::cores(),
        cpu,
        load_average_at_start,
    }
}
