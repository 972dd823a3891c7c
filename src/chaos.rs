//! Chaos mode: the failure modes of the articles, on demand.
//!
//! Off unless an instance runs with `serve --chaos` (`up --chaos`, the lab).
//! Faults are armed in Redis by `POST /api/admin/chaos`, so whichever
//! instance takes the next matching request is the one that fails:
//!
//! - `crash_after_setnx`: the next `setnx` request that acquires the lock
//!   aborts its process between `SETNX` and `EXPIRE`, a real crash that
//!   leaves a lock with no TTL;
//! - `pause_holder` (`ms`): the next request to enter a critical section
//!   freezes its whole process (SIGSTOP: the watchdog too) for `ms`, after
//!   its last check that it still holds the lock and right before its
//!   write (Kleppmann's pause: nothing a lock can check comes after it); a
//!   helper process sends SIGCONT;
//! - `lock_vanishes` (`sku`): the lock key is deleted, whoever holds it (the
//!   stand-in for a failover or a clock jump);
//! - `crash`: the instance that takes this request aborts right after answering.
//!
//! Chaos mode also lets an instance run with a skewed clock
//! (`--clock-skew-ms`, for `setnx-expiry`) and records every critical
//! section on the host's monotonic clock (the overlap witness).

use std::path::PathBuf;
use std::time::Duration;

use crate::store::Conn;
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

use crate::sale::Outcome;
use crate::store::{Keys, StoreError};

const CRASH_AFTER_SETNX: &str = "stocklock:chaos:crash_after_setnx";
const PAUSE_HOLDER: &str = "stocklock:chaos:pause_holder";
/// How many sections the witness keeps per SKU.
const WITNESS_KEEP: isize = 10_000;

/// One critical section as the witness saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Section {
    pub instance: String,
    /// The lock owner (and fencing token) when the variant has one.
    pub holder: Option<String>,
    /// CLOCK_MONOTONIC nanoseconds: one clock for every process of the host.
    pub enter_ns: u64,
    pub exit_ns: u64,
    pub outcome: String,
}

impl Section {
    /// A section that entered at `enter_ns` and exits now.
    pub fn timed(
        instance: &str,
        holder: Option<&str>,
        enter_ns: u64,
        outcome: &Outcome,
    ) -> Section {
        Section {
            instance: instance.to_owned(),
            holder: holder.map(str::to_owned),
            enter_ns,
            exit_ns: monotonic_ns(),
            outcome: outcome.encode().unwrap_or_else(|| "busy".to_owned()),
        }
    }
}

/// This process's chaos settings.
#[derive(Clone, Debug, Default)]
pub struct Chaos {
    enabled: bool,
    clock_skew_ms: i64,
    /// Whether the Redis may be paused and restarted (`up` owns it).
    redis_control: bool,
    /// This program, to start the SIGCONT helper.
    binary: Option<PathBuf>,
}

impl Chaos {
    /// No chaos at all: every hook is a no-op.
    pub fn off() -> Self {
        Self::default()
    }

    pub fn on(clock_skew_ms: i64) -> Self {
        Self {
            enabled: true,
            clock_skew_ms,
            redis_control: false,
            binary: std::env::current_exe().ok(),
        }
    }

    /// Allows pausing and restarting the Redis (when `up` owns and restarts it).
    pub fn with_redis_control(mut self, allowed: bool) -> Self {
        self.redis_control = allowed;
        self
    }

    pub fn redis_control(&self) -> bool {
        self.enabled && self.redis_control
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Wall-clock milliseconds as this instance believes them (skewed in chaos mode).
    pub fn now_ms(&self) -> i64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        now + if self.enabled { self.clock_skew_ms } else { 0 }
    }

    /// Whether this `setnx` acquisition is the one armed to crash.
    pub async fn take_crash_after_setnx(&self, conn: &mut Conn) -> Result<bool, StoreError> {
        if !self.enabled {
            return Ok(false);
        }
        let armed: Option<String> = conn.get_del(CRASH_AFTER_SETNX).await?;
        Ok(armed.is_some())
    }

    /// Called (chaos mode) when a section has read the stock: announces it
    /// (the event the lab waits for before it strikes, so that its faults
    /// land inside the gap) and takes the pause armed for this section, if
    /// any, for [`Chaos::stop_the_world`]. One round trip.
    pub async fn in_the_gap(
        &self,
        conn: &mut Conn,
        keys: &Keys,
    ) -> Result<Option<Duration>, StoreError> {
        if !self.enabled {
            return Ok(None);
        }
        // Two commands sent together, not one pipeline: on a cluster they
        // go to different nodes.
        let mut other = conn.clone();
        let channel = section_channel(keys);
        let (published, armed) = tokio::join!(
            other.publish::<_, _, i64>(&channel, "entered"),
            conn.get_del::<_, Option<u64>>(PAUSE_HOLDER)
        );
        published?;
        Ok(armed?.map(Duration::from_millis))
    }

    /// Freezes the whole process (every thread, the watchdog's included)
    /// for `pause`, until a helper process wakes it.
    pub fn stop_the_world(&self, pause: Duration) {
        if let Some(binary) = &self.binary {
            freeze(binary, pause);
        }
    }

    /// The monotonic clock, when the witness records (chaos mode).
    pub fn witness_clock(&self) -> Option<u64> {
        self.enabled.then(monotonic_ns)
    }

    /// Records one critical section for the lab's overlap check.
    pub async fn witness(
        &self,
        conn: &mut Conn,
        keys: &Keys,
        section: &Section,
    ) -> Result<(), StoreError> {
        let json = serde_json::to_string(section).unwrap_or_default();
        let _: () = redis::pipe()
            .rpush(&keys.sections, json)
            .ignore()
            .ltrim(&keys.sections, -WITNESS_KEEP, -1)
            .ignore()
            .query_async(conn)
            .await?;
        Ok(())
    }
}

/// The channel a section's entry is announced on (chaos mode).
pub fn section_channel(keys: &Keys) -> String {
    format!("stocklock:section:{}", keys.stock)
}

/// Arms the next `setnx` acquisition to crash.
pub async fn arm_crash_after_setnx(conn: &mut Conn) -> Result<(), StoreError> {
    let _: () = conn.set(CRASH_AFTER_SETNX, 1).await?;
    Ok(())
}

/// Arms the next critical section to freeze its process for `ms`.
pub async fn arm_pause_holder(conn: &mut Conn, ms: u64) -> Result<(), StoreError> {
    let _: () = conn.set(PAUSE_HOLDER, ms).await?;
    Ok(())
}

/// The sections the witness recorded for a SKU, oldest first.
pub async fn sections(conn: &mut Conn, keys: &Keys) -> Result<Vec<Section>, StoreError> {
    let raw: Vec<String> = conn.lrange(&keys.sections, 0, -1).await?;
    Ok(raw
        .iter()
        .filter_map(|s| serde_json::from_str(s).ok())
        .collect())
}

/// Pairs of sections that overlapped in time: two holders at once.
pub fn overlaps(sections: &[Section]) -> Vec<(Section, Section)> {
    let mut sorted: Vec<&Section> = sections.iter().collect();
    sorted.sort_by_key(|s| s.enter_ns);
    let mut pairs = Vec::new();
    for (i, a) in sorted.iter().enumerate() {
        for b in &sorted[i + 1..] {
            if b.enter_ns >= a.exit_ns {
                break;
            }
            pairs.push(((*a).clone(), (*b).clone()));
        }
    }
    pairs
}

fn monotonic_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// Stops this whole process (every thread, the watchdog's included) with
/// SIGSTOP, after starting a helper that sends SIGCONT `pause` later. A
/// process cannot wake itself: it is frozen.
fn freeze(binary: &std::path::Path, pause: Duration) {
    let pid = std::process::id();
    let helper = std::process::Command::new(binary)
        .args([
            "resume",
            "--pid",
            &pid.to_string(),
            "--after-ms",
            &pause.as_millis().to_string(),
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn();
    match helper {
        Ok(mut helper) => {
            tracing::warn!(pid, ?pause, "chaos: freezing the whole process");
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
            // Reap the helper once it is done, off the async threads.
            std::thread::spawn(move || {
                let _ = helper.wait();
            });
        }
        Err(err) => tracing::error!(%err, "chaos: cannot start the SIGCONT helper; not freezing"),
    }
}

/// `stocklock resume`: the helper that wakes a frozen process.
pub fn resume(pid: u32, after: Duration) {
    std::thread::sleep(after);
    crate::up::process::signal(pid, nix::sys::signal::Signal::SIGCONT);
}
