//! The faults a section or a worker takes: armed in Redis, looked for only
//! while an arming was heard of, each taken (and disarmed) by the first
//! that asks, and the process frozen or aborted as armed.

use std::time::Duration;

use redis::AsyncCommands;

use crate::store::{Conn, Keys, StoreError};

use super::armed::{
    ARMED_KEYS, CRASH_AFTER_ACQUIRE, CRASH_AFTER_WRITE, CRASH_BEFORE_ENQUEUE, PAUSE_HOLDER,
    WORKER_CRASH_BEFORE_ACK,
};
use super::strike::freeze;
use super::{Chaos, section_channel};

/// The faults armed for the section that just entered its gap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Freeze the whole process this long right before the write.
    pub pause: Option<Duration>,
    /// Abort the process right after the write, before answering.
    pub crash_after_write: bool,
}

impl Chaos {
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
