//! The order workers held still, or moved a turn at a time. A model's
//! worker moves only when its schedule says so. Two ways to hold the live
//! ones (chaos mode only; a worker looks once per turn of its loop, and a
//! turn is at most 200 ms: a read waits that long for messages):
//!
//! - [`hold`]: every worker stops and says so ([`await_held`]) until
//!   [`let_go`], or until Redis loses the hold with its data (a restart that
//!   keeps nothing), the moment the model's worker would find the stream
//!   empty too. A replay holds them so before its first sale: none of the
//!   order cells' shortest counterexamples moves the worker.
//! - [`give_turns`]: the workers wait at their loop's top as buyers of a
//!   run ([`worker`]: `@a` for instance `a`'s), at the gate `turn`, and
//!   one loop turn goes each time the run lets one go. A worker that
//!   committed a scheduled buyer's order stops at the buyer's gate under a
//!   name of its own ([`committer`]: `B@a`), so that two workers holding
//!   one order are let go one by one. An exploration schedules them so.
//!
//! The hold lives where the gates meet.

use std::time::Duration;

use redis::AsyncCommands;

use super::Gates;
use crate::lock::Point;
use crate::store::StoreError;

/// Set while the workers are held: [`ALL`] (it expires by itself,
/// [`super::DEADLINE`]), or the run that gives them turns.
const HOLD: &str = "{stocklock:gate}:workers";
const ALL: &str = "1";
/// Where a worker given turns waits for its next.
pub const TURN: Point = Point::new("turn");
/// Where each held worker says so (its consumer's name).
const HELD: &str = "{stocklock:gate}:workers:held";
/// How often a held worker looks whether it may go on (a worker waits
/// for no buyer: nothing is late for it).
const LOOK: Duration = Duration::from_millis(20);

/// The name a worker goes by among a run's arrivals (`@a`).
pub fn worker(consumer: &str) -> String {
    format!("@{consumer}")
}

/// The name a worker goes by at `buyer`'s gate after committing its
/// order (`B@a`).
pub fn committer(buyer: &str, consumer: &str) -> String {
    format!("{buyer}@{consumer}")
}

/// A worker's side, at the top of its loop: returns at once unless the
/// workers are held; held, it says so once and waits until they are let
/// go; given turns, it waits for its next. `true` when it goes on for a
/// turn a run gave it.
pub async fn wait_while_held(gates: &Gates, consumer: &str) -> Result<bool, StoreError> {
    let mut conn = super::waiting_conn(&gates.client().await?).await?;
    let mut announced = false;
    loop {
        let hold: Option<String> = conn.get(HOLD).await?;
        let run = match hold.as_deref() {
            None => return Ok(false),
            Some(ALL) => None,
            Some(run) => Some(run),
        };
        if let Some(run) = run {
            let name = worker(consumer);
            let turn = TURN.to_string();
            // An abandoned run holds nobody: the worker goes on at once.
            if !super::arrive(&mut conn, run, (&name, ""), &turn).await? {
                return Ok(false);
            }
            return super::await_release(&mut conn, run, &name, &turn).await;
        }
        if !announced {
            let _: () = redis::pipe()
                .rpush(HELD, consumer)
                .pexpire(HELD, super::DEADLINE.as_millis() as i64)
                .query_async(&mut conn)
                .await?;
            announced = true;
            tracing::info!(consumer, "order worker: held by a schedule");
        }
        tokio::time::sleep(LOOK).await;
    }
}

/// Whether the workers are held (the instances' own expiry passes wait
/// meanwhile: they too are the pipeline's).
pub async fn held(gates: &Gates) -> Result<bool, StoreError> {
    let mut conn = gates
        .client()
        .await?
        .get_multiplexed_async_connection()
        .await?;
    Ok(conn.exists(HOLD).await?)
}

/// Gives the workers turns through `run` (for [`super::RUN_TTL`] at most):
/// each waits for its next at [`TURN`].
pub async fn give_turns(
    conn: &mut redis::aio::MultiplexedConnection,
    run: &str,
) -> Result<(), StoreError> {
    let _: () = conn.set_ex(HOLD, run, super::RUN_TTL.as_secs()).await?;
    Ok(())
}

/// Holds every worker (for [`super::DEADLINE`] at most).
pub async fn hold(conn: &mut redis::aio::MultiplexedConnection) -> Result<(), StoreError> {
    let _: () = redis::pipe()
        .del(HELD)
        .set_ex(HOLD, ALL, super::DEADLINE.as_secs())
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
