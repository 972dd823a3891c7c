//! A classroom seat's experiments: the steps that touch nothing but their
//! SKU, played on SKUs of the seat's own, one at a time per seat and
//! [`SEAT_EXPERIMENTS`] seats' at once over the whole stack (each is 400
//! buyers: thirty at once would drown two cores).

use std::sync::LazyLock;

use redis::Script;

use super::{RUN_LIMIT_S, STATUS_KEY, StartError, Step};
use crate::lab::Scenario;
use crate::store::{Conn, StoreError};

/// Seats' experiments running at once, stack-wide.
pub const SEAT_EXPERIMENTS: usize = 3;

/// The sorted set of the seats whose experiment runs, scored by when its
/// claim expires (should the lab process die without a word).
fn running_key() -> String {
    format!("{STATUS_KEY}:seats-running")
}

/// What a seat's SKUs start with: `seat-ID-` (the variant's name follows).
pub fn sku_prefix(seat: &str) -> String {
    format!("seat-{seat}-")
}

/// Claims a run for `seat`: 1, or 0 when the seat runs one already, -1
/// when [`SEAT_EXPERIMENTS`] seats do. Expired claims go first.
static CLAIM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
        redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
        if redis.call('ZSCORE', KEYS[1], ARGV[3]) then return 0 end
        if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return -1 end
        redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
        return 1",
    )
});

/// Claims `step`'s experiment for `seat`, or says why not.
pub(super) async fn claim(conn: &mut Conn, step: &Step, seat: &str) -> Result<(), StartError> {
    let per_sku = step
        .scenario
        .parse::<Scenario>()
        .is_ok_and(Scenario::per_sku);
    if !per_sku {
        return Err(StartError::NotASeats);
    }
    let now = crate::timeline::now_ns() / 1_000_000;
    let claimed: i64 = CLAIM
        .key(running_key())
        .arg(now)
        .arg(now + RUN_LIMIT_S * 1_000)
        .arg(seat)
        .arg(SEAT_EXPERIMENTS)
        .invoke_async(conn)
        .await
        .map_err(StoreError::from)?;
    match claimed {
        1 => Ok(()),
        0 => Err(StartError::SeatBusy),
        _ => Err(StartError::ClassBusy),
    }
}

/// `seat`'s next experiment may start.
pub(super) async fn release(conn: &mut Conn, seat: &str) -> Result<(), StoreError> {
    let _: i64 = redis::cmd("ZREM")
        .arg(running_key())
        .arg(seat)
        .query_async(conn)
        .await?;
    Ok(())
}
