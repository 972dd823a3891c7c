//! Redis paused on purpose (`DEBUG SLEEP`): the moment it stops answering,
//! and the moment it answers again, seen from a connection of the lab's own.

use std::time::{Duration, Instant};

use anyhow::Context;

use crate::chaos;
use crate::judge::Check;
use crate::store::Store;

/// How long Redis has to stop answering once `DEBUG SLEEP` was sent, and a
/// PING that long unanswered says it has.
const PAUSE_TIMEOUT: Duration = Duration::from_secs(5);
const PAUSED_AFTER: Duration = Duration::from_millis(50);
/// How long a paused Redis has to answer again, past its pause.
const WAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection of the lab's own to its Redis, opened before a pause:
/// it sees Redis stop answering, and answer again.
pub struct Probe {
    conn: redis::aio::MultiplexedConnection,
    pause: Duration,
}

impl Probe {
    /// A PING: `Ok(false)` when no answer came within `within`.
    async fn ping(&mut self, within: Duration) -> anyhow::Result<bool> {
        let ping = redis::cmd("PING");
        match tokio::time::timeout(within, ping.query_async::<String>(&mut self.conn)).await {
            Ok(answer) => answer.map(|_| true).context("PING"),
            Err(_) => Ok(false),
        }
    }

    /// Returns once Redis answers again: a PING sent now waits for the end
    /// of the pause.
    pub async fn answering(&mut self) -> anyhow::Result<()> {
        if self.ping(self.pause + WAKE_TIMEOUT).await? {
            Ok(())
        } else {
            anyhow::bail!("Redis did not answer again after its pause")
        }
    }
}

/// Pauses the Redis at `redis_url` (`store`'s) for `pause` (`DEBUG SLEEP`,
/// on a connection of its own), noting on its timeline that `who` did,
/// and returns once it has stopped answering: a PING unanswered for 50 ms.
/// Whether it stopped (why not: it kept answering), and the probe that
/// tells when it answers again.
pub async fn pause_redis(
    redis_url: &str,
    store: &Store,
    pause: Duration,
    who: &str,
) -> anyhow::Result<(Check, Probe)> {
    let client = redis::Client::open(redis_url)?;
    // No timeout of the connection's own: `answering` waits out the pause.
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    let mut probe = Probe {
        conn: client
            .get_multiplexed_async_connection_with_config(&config)
            .await?,
        pause,
    };
    let mut conn = store.conn().await?;
    let detail = format!("{} ms ({who})", pause.as_millis());
    crate::timeline::event(&mut conn, "pause_redis", None, None, detail).await;
    chaos::pause_redis(store, pause);
    let deadline = Instant::now() + PAUSE_TIMEOUT;
    while probe.ping(PAUSED_AFTER).await? {
        if Instant::now() > deadline {
            let secs = PAUSE_TIMEOUT.as_secs();
            let why = crate::said!(
                "Redis kept answering {secs} s after DEBUG SLEEP",
                "DEBUG SLEEP 之后 {secs} s,Redis 仍在应答"
            );
            return Ok((Err(why), probe));
        }
    }
    Ok((Ok(()), probe))
}
