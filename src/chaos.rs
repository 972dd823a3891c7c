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
use std::time::Duration;

use redis::AsyncCommands;

use crate::store::{Conn, Keys, Store, StoreError};

mod armed;
pub mod mutant;

pub use armed::{
    ARMED_CHANNEL, ARMED_KEYS, arm_crash_after_acquire, arm_crash_after_write,
    arm_crash_before_enqueue, arm_pause_holder, arm_worker_crash_before_ack, disarm,
};
use armed::{
    CRASH_AFTER_ACQUIRE, CRASH_AFTER_WRITE, CRASH_BEFORE_ENQUEUE, PAUSE_HOLDER,
    WORKER_CRASH_BEFORE_ACK,
};

/// The faults armed for the section that just entered its gap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Freeze the whole process this long right before the write.
    pub pause: Option<Duration>,
    /// Abort the process right after the write, before answering.
    pub crash_after_write: bool,
}

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

    /// Crashes the process if this acquisition is the one armed to: how
    /// `setnx` asks between its SETNX and its EXPIRE. Locks that do not ask
    /// crash in the gap instead ([`Chaos::in_the_gap`]), holding the lock
    /// with nothing written.
    pub async fn crash_if_armed_after_acquire(
        &self,
        conn: &mut Conn,
        keys: &Keys,
    ) -> Result<(), StoreError> {
        let Some(seen) = self.may_be_armed() else {
            return Ok(());
        };
        let (armed, others): (Option<String>, i64) = redis::pipe()
            .get_del(CRASH_AFTER_ACQUIRE)
            .exists(&ARMED_KEYS[1..])
            .query_async(conn)
            .await?;
        if armed.is_some() {
            self.crash_recorded(conn, &keys.tag, "between SETNX and EXPIRE, as armed")
                .await;
        }
        if others == 0 {
            self.found_none(seen);
        }
        Ok(())
    }

    /// Called (chaos mode) when a section has read the stock and found
    /// some: takes the faults armed for this section (one round trip while
    /// an arming was heard of, none otherwise), then announces on the SKU's
    /// section channel that it is in the gap between its read and its
    /// write. The announcement is sent after every answer the section
    /// needs before its work, and its own answer is not needed: whoever
    /// strikes on hearing it (kills Redis, pauses this process) cannot
    /// fail a command of this section before its write. A holder armed to
    /// crash here announces first, then crashes.
    pub async fn in_the_gap(&self, conn: &mut Conn, keys: &Keys) -> Result<Faults, StoreError> {
        if !self.enabled {
            return Ok(Faults::default());
        }
        let mut faults = Faults::default();
        if let Some(seen) = self.may_be_armed() {
            // One pipeline: the keys share a hash tag (one slot on a cluster).
            let (pause, crash_now, crash_later, others): (
                Option<u64>,
                Option<String>,
                Option<String>,
                i64,
            ) = redis::pipe()
                .get_del(PAUSE_HOLDER)
                .get_del(CRASH_AFTER_ACQUIRE)
                .get_del(CRASH_AFTER_WRITE)
                .exists(&ARMED_KEYS[3..])
                .query_async(conn)
                .await?;
            if crash_now.is_some() {
                let _: Result<i64, _> = conn.publish(section_channel(keys), "entered").await;
                self.crash_recorded(
                    conn,
                    &keys.tag,
                    "holding the lock, before the write, as armed",
                )
                .await;
            }
            if pause.is_none() && crash_later.is_none() && others == 0 {
                self.found_none(seen);
            }
            faults = Faults {
                pause: pause.map(Duration::from_millis),
                crash_after_write: crash_later.is_some(),
            };
        }
        // Its own answer may never come (whoever heard it may have killed
        // Redis at once): an error here changes nothing for the section.
        let announced: Result<i64, _> = conn.publish(section_channel(keys), "entered").await;
        if let Err(err) = announced {
            tracing::debug!(%err, "the announcement of a section's gap was not answered");
        }
        Ok(faults)
    }

    /// Freezes the whole process (every thread, the watchdog's included)
    /// for `pause`, until a helper process wakes it.
    pub fn stop_the_world(&self, pause: Duration) {
        if let Some(binary) = &self.binary {
            freeze(binary, pause);
        }
    }

    /// Whether this order sale is the one armed to crash right after its
    /// script (and disarms it). Free while nothing is armed: a round trip
    /// only after an arming was heard, as for the sections' faults.
    pub async fn crash_before_enqueue(&self, conn: &mut Conn) -> Result<bool, StoreError> {
        self.take(conn, CRASH_BEFORE_ENQUEUE).await
    }

    /// Whether this worker's batch is the one armed to crash between its
    /// commit and its ack (and disarms it); free while nothing is armed.
    pub async fn worker_crash_before_ack(&self, conn: &mut Conn) -> Result<bool, StoreError> {
        self.take(conn, WORKER_CRASH_BEFORE_ACK).await
    }

    /// Takes the armed fault `key`, if an arming was heard and it is still
    /// there; stops looking once no fault at all is left.
    async fn take(&self, conn: &mut Conn, key: &str) -> Result<bool, StoreError> {
        let Some(seen) = self.may_be_armed() else {
            return Ok(false);
        };
        let (armed, left): (Option<String>, i64) = redis::pipe()
            .get_del(key)
            .exists(&ARMED_KEYS[..])
            .query_async(conn)
            .await?;
        if left == 0 {
            self.found_none(seen);
        }
        Ok(armed.is_some())
    }
}

/// The channel a section's entry is announced on (chaos mode).
pub fn section_channel(keys: &Keys) -> String {
    format!("stocklock:section:{}", keys.stock)
}

/// Aborts the process now: a real crash, as chaos mode armed it.
pub fn crash(when: &str) -> ! {
    eprintln!("chaos: crashing {when}");
    std::process::abort();
}

/// Deletes a SKU's lock key, whoever holds it (`lock_vanishes`: the
/// stand-in for a failover or a clock jump). Whether there was one.
pub async fn vanish_lock(conn: &mut Conn, keys: &Keys) -> Result<bool, StoreError> {
    let deleted: i64 = conn.del(&keys.lock).await?;
    Ok(deleted == 1)
}

/// Freezes the Redis for `pause` (`DEBUG SLEEP`) and returns at once. On a
/// connection of its own: the pause blocks whoever asks.
pub fn pause_redis(store: &Store, pause: Duration) {
    let store = store.clone();
    tokio::spawn(async move {
        let Ok(client) = store.master_client().await else {
            return;
        };
        if let Ok(mut conn) = client.get_multiplexed_async_connection().await {
            let _: Result<String, _> = redis::cmd("DEBUG")
                .arg("SLEEP")
                .arg(pause.as_millis() as f64 / 1000.0)
                .query_async(&mut conn)
                .await;
        }
    });
}

/// Stops the Redis without saving (`SHUTDOWN NOSAVE`); `up`, which owns
/// it, starts it again.
pub async fn restart_redis(store: &Store) -> Result<(), StoreError> {
    let mut own = store
        .master_client()
        .await?
        .get_multiplexed_async_connection()
        .await?;
    // The answer never comes: the server goes away.
    let _: Result<(), _> = redis::cmd("SHUTDOWN")
        .arg("NOSAVE")
        .query_async(&mut own)
        .await;
    Ok(())
}

/// Aborts this process a moment from now (`crash`): long enough for the
/// answer that says so to leave.
pub fn crash_soon() {
    tokio::spawn(async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        eprintln!("chaos: crashing, as asked");
        std::process::abort();
    });
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
    crate::os::signal(pid, nix::sys::signal::Signal::SIGCONT);
}
