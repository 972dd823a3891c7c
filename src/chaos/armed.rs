//! The armed faults: one key each in Redis, set by the admin's chaos
//! actions and taken by the first section (or worker) that meets it, and
//! the channel an arming is announced on.

use redis::AsyncCommands;

use crate::store::{Conn, StoreError};

// One hash tag for every armed fault: one slot on a cluster, so they can
// be cleared by one command.
pub(super) const CRASH_AFTER_ACQUIRE: &str = "{stocklock:chaos}:crash_after_acquire";
pub(super) const CRASH_AFTER_WRITE: &str = "{stocklock:chaos}:crash_after_write";
pub(super) const PAUSE_HOLDER: &str = "{stocklock:chaos}:pause_holder";
// The order pipeline's faults (an order sale, a worker's batch).
pub(super) const CRASH_BEFORE_ENQUEUE: &str = "{stocklock:chaos}:crash_before_enqueue";
pub(super) const WORKER_CRASH_BEFORE_ACK: &str = "{stocklock:chaos}:worker_crash_before_ack";
/// Every armed fault's key, for clearing them all.
pub const ARMED_KEYS: [&str; 5] = [
    CRASH_AFTER_ACQUIRE,
    CRASH_AFTER_WRITE,
    PAUSE_HOLDER,
    CRASH_BEFORE_ENQUEUE,
    WORKER_CRASH_BEFORE_ACK,
];
/// Where an arming is announced, so that instances look for armed faults.
pub const ARMED_CHANNEL: &str = "stocklock:chaos:armed";

/// Arms the next lock acquisition to crash right after it (`setnx`: before EXPIRE).
pub async fn arm_crash_after_acquire(conn: &mut Conn) -> Result<(), StoreError> {
    arm(conn, CRASH_AFTER_ACQUIRE, 1).await
}

/// Sets an armed fault's key and announces it ([`ARMED_CHANNEL`]).
async fn arm(conn: &mut Conn, key: &str, value: u64) -> Result<(), StoreError> {
    let _: () = conn.set(key, value).await?;
    let _: i64 = conn.publish(ARMED_CHANNEL, key).await?;
    Ok(())
}

/// Arms the next section that writes to crash right after its write.
pub async fn arm_crash_after_write(conn: &mut Conn) -> Result<(), StoreError> {
    arm(conn, CRASH_AFTER_WRITE, 1).await
}

/// Clears every armed fault (one that was armed and never triggered).
pub async fn disarm(conn: &mut Conn) -> Result<(), StoreError> {
    let _: i64 = conn.del(&ARMED_KEYS[..]).await?;
    Ok(())
}

/// Arms the next sale of an order variant to crash right after its script.
pub async fn arm_crash_before_enqueue(conn: &mut Conn) -> Result<(), StoreError> {
    arm(conn, CRASH_BEFORE_ENQUEUE, 1).await
}

/// Arms the next order worker's batch to crash between commit and ack.
pub async fn arm_worker_crash_before_ack(conn: &mut Conn) -> Result<(), StoreError> {
    arm(conn, WORKER_CRASH_BEFORE_ACK, 1).await
}

/// Arms the next critical section to freeze its process for `ms`.
pub async fn arm_pause_holder(conn: &mut Conn, ms: u64) -> Result<(), StoreError> {
    arm(conn, PAUSE_HOLDER, ms).await
}
