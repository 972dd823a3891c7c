//! Chaos mode: the failure modes of the articles, on demand.
//!
//! Off unless an instance runs with `serve --chaos` (`up --chaos`, the lab).
//! Faults are armed in Redis by `POST /api/admin/chaos`, so whichever
//! instance takes the next matching request is the one that fails:
//!
//! - `crash_after_acquire`: the next request that acquires a lock aborts
//!   its process right after: `setnx` between `SETNX` and `EXPIRE` (a lock
//!   with no TTL), the other locks holding the lock with nothing written;
//! - `crash_after_write`: the next section to write aborts its process
//!   right after the write, before it answers (the sale is in the ledger,
//!   the buyer never hears of it: a retry must replay it);
//! - `pause_holder` (`ms`): the next request to enter a critical section
//!   freezes its whole process (SIGSTOP: the watchdog too) for `ms`, after
//!   its last check that it still holds the lock and right before its
//!   write (Kleppmann's pause: nothing a lock can check comes after it); a
//!   helper process sends SIGCONT;
//! - `lock_vanishes` (`sku`): the lock key is deleted, whoever holds it (the
//!   stand-in for a failover or a clock jump);
//! - `crash`: the instance that takes this request aborts right after answering;
//! - `crash_before_enqueue`: the next sale of an order variant aborts its
//!   process right after its sale script, before anything else (for
//!   `lua-then-queue` that is before its `XADD`: the unit is lost; for
//!   `lua-stream` the order is already on its stream);
//! - `worker_crash_before_ack`: the next order worker to commit a batch of
//!   orders aborts its process before it acks the messages;
//! - `pause_redis` (`ms`) and `restart_redis`: the Redis that `up` owns
//!   freezes (`DEBUG SLEEP`) or stops (`up` starts it again).
//!
//! What chaos mode costs a section when nothing is armed: the announcement
//! that it entered its gap, sent together with its read (no round trip of
//! its own). An arming is announced on [`ARMED_CHANNEL`] and the admin
//! call returns once every instance has heard it; only then do sections
//! look for armed faults, until a look finds none left.
//!
//! Chaos mode also lets an instance run with a skewed clock
//! (`--clock-skew-ms`, or the `clock_skew` action sent to the instance
//! itself; read by `setnx-expiry`). Every fault that strikes is recorded
//! as an event on the timeline ([`crate::timeline`]).
//! [`mutant`]: a debug build's live mutants (a lock's mechanism taken out).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::store::{Conn, Keys};

mod armed;
mod faults;
pub mod mutant;
mod strike;

pub use armed::{
    ARMED_CHANNEL, ARMED_KEYS, arm_crash_after_acquire, arm_crash_after_write,
    arm_crash_before_enqueue, arm_pause_holder, arm_worker_crash_before_ack, disarm,
};
pub use faults::Faults;
pub use strike::{crash, crash_soon, pause_redis, restart_redis, resume, vanish_lock};

/// This process's chaos settings.
#[derive(Clone, Debug, Default)]
pub struct Chaos {
    enabled: bool,
    /// Shared by every clone: the `clock_skew` action changes it at run time.
    clock_skew_ms: Arc<AtomicI64>,
    /// Whether the Redis may be paused and restarted (`up` owns it).
    redis_control: bool,
    /// The instance's name, for the events it records on the timeline.
    instance: String,
    /// This program, to start the SIGCONT helper.
    binary: Option<PathBuf>,
    /// Odd while faults may be armed: sections look for them. Every
    /// arming heard makes it odd (+1 or +2); a look that found none makes
    /// it even again, unless an arming came meanwhile. Starts odd (a fault
    /// armed before this instance started).
    armed: Arc<AtomicU64>,
    /// Where gates meet, if not on the stock's Redis (`--gate-redis`).
    gate_redis: Option<redis::Client>,
}

impl Chaos {
    /// No chaos at all: every hook is a no-op.
    pub fn off() -> Self {
        Self::default()
    }

    pub fn on(clock_skew_ms: i64) -> Self {
        Self {
            enabled: true,
            clock_skew_ms: Arc::new(AtomicI64::new(clock_skew_ms)),
            redis_control: false,
            instance: String::new(),
            binary: std::env::current_exe().ok(),
            armed: Arc::new(AtomicU64::new(1)),
            gate_redis: None,
        }
    }

    /// Gates meet on `client`'s Redis ([`crate::gate::Gates`]).
    pub fn with_gate_redis(mut self, client: Option<redis::Client>) -> Self {
        self.gate_redis = client;
        self
    }

    /// Allows pausing and restarting the Redis (when `up` owns and restarts it).
    pub fn with_redis_control(mut self, allowed: bool) -> Self {
        self.redis_control = allowed;
        self
    }

    /// Names the instance in the events it records on the timeline.
    pub fn named(mut self, instance: &str) -> Self {
        self.instance = instance.to_owned();
        self
    }

    /// Records a fault that strikes this instance (for `sku`, or all of
    /// them) as an event on the timeline.
    pub async fn record(&self, conn: &mut Conn, kind: &str, sku: Option<&str>, detail: &str) {
        let instance = (!self.instance.is_empty()).then_some(self.instance.as_str());
        crate::timeline::event(conn, kind, instance, sku, detail.to_owned()).await;
    }

    /// Records the crash on the timeline, then aborts the process.
    pub async fn crash_recorded(&self, conn: &mut Conn, sku: &str, when: &str) {
        self.record(conn, "crash", Some(sku), when).await;
        crash(when)
    }

    pub fn redis_control(&self) -> bool {
        self.enabled && self.redis_control
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    pub fn gate_redis(&self) -> Option<&redis::Client> {
        self.gate_redis.as_ref()
    }

    /// Wall-clock milliseconds as this instance believes them (skewed in chaos mode).
    pub fn now_ms(&self) -> i64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        now + if self.enabled {
            self.clock_skew_ms.load(Ordering::Relaxed)
        } else {
            0
        }
    }

    /// An arming was announced ([`ARMED_CHANNEL`]), or announcements may
    /// have been missed: sections look for armed faults again.
    pub fn heard_armed(&self) {
        let _ = self
            .armed
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(if n % 2 == 1 { n + 2 } else { n + 1 })
            });
    }

    /// Whether sections must look for armed faults; the value to hand to
    /// [`Self::found_none`].
    fn may_be_armed(&self) -> Option<u64> {
        let n = self.armed.load(Ordering::Acquire);
        (self.enabled && n % 2 == 1).then_some(n)
    }

    /// A look begun at `seen` found nothing armed: stop looking, unless an
    /// arming was heard since.
    fn found_none(&self, seen: u64) {
        let _ = self
            .armed
            .compare_exchange(seen, seen + 1, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Runs this instance's clock `ms` ahead from now on (chaos mode).
    pub fn set_clock_skew(&self, ms: i64) {
        self.clock_skew_ms.store(ms, Ordering::Relaxed);
    }

    /// The clock offset this instance runs with.
    pub fn clock_skew_ms(&self) -> i64 {
        self.clock_skew_ms.load(Ordering::Relaxed)
    }
}

/// The channel a section's entry is announced on (chaos mode).
pub fn section_channel(keys: &Keys) -> String {
    format!("stocklock:section:{}", keys.stock)
}
