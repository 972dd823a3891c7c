//! The order workers held still. A model's worker moves only when its
//! schedule says so, and in the shortest counterexamples of the order
//! cells it never moves: the sale's message waits on the stream while
//! Redis loses it. A replay of such a cell holds every live worker before
//! its first sale ([`hold`]), and hears each one say it is held
//! ([`await_held`]) before it lets a buyer go: from then on no worker reads
//! the stream until [`let_go`], or until Redis loses the hold with its data
//! (a restart that keeps nothing), the moment the model's worker would
//! find the stream empty too.
//!
//! Workers look for the hold only in chaos mode, once per turn of their
//! loop (a turn is at most 200 ms: a read waits that long for messages).

use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::ConnectionLike;

use crate::store::StoreError;

/// Set while the workers are held; it expires by itself ([`super::DEADLINE`]).
const HOLD: &str = "{stocklock:gate}:workers";
/// Where each held worker says so (its consumer's name).
const HELD: &str = "{stocklock:gate}:workers:held";
/// How often a held worker looks whether it may go on (a worker waits
/// for no buyer: nothing is late for it).
const LOOK: Duration = Duration::from_millis(20);

/// A worker's side: returns at once unless the workers are held; held, it
/// says so once and waits until they are let go.
pub async fn wait_while_held<C: ConnectionLike + Send>(
    conn: &mut C,
    consumer: &str,
) -> Result<(), StoreError> {
    let mut announced = false;
    loop {
        let held: bool = redis::cmd("EXISTS").arg(HOLD).query_async(conn).await?;
        if !held {
            return Ok(());
        }
        if !announced {
            let _: () = redis::pipe()
                .rpush(HELD, consumer)
                .pexpire(HELD, super::DEADLINE.as_millis() as i64)
                .query_async(conn)
                .await?;
            announced = true;
            tracing::info!(consumer, "order worker: held by a schedule");
        }
        tokio::time::sleep(LOOK).await;
    }
}

/// Holds every worker (for [`super::DEADLINE`] at most).
pub async fn hold(conn: &mut redis::aio::MultiplexedConnection) -> Result<(), StoreError> {
    let _: () = redis::pipe()
        .del(HELD)
        .set_ex(HOLD, 1, super::DEADLINE.as_secs())
        .query_async(conn)
        .await?;
    Ok(())
}

/// Waits until `workers` workers said they are held, `timeout` at most;
/// the names of those that did.
pub async fn await_held(
    conn: &mut redis::aio::MultiplexedConnection,
    workers: usize,
    timeout: Duration,
) -> Result<Vec<String>, StoreError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut held = Vec::new();
    while held.len() < workers {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            break;
        }
        let popped: Option<(String, String)> = conn.blpop(HELD, left.as_secs_f64()).await?;
        match popped {
            Some((_, consumer)) if !held.contains(&consumer) => held.push(consumer),
            Some(_) => {}
            None => break,
        }
    }
    Ok(held)
}

/// Lets the workers go on.
pub async fn let_go(conn: &mut redis::aio::MultiplexedConnection) -> Result<(), StoreError> {
    let _: () = conn.del(&[HOLD, HELD]).await?;
    Ok(())
}
