//! A seat's heavy work: a lesson's experiment, a card's run. Each sends
//! hundreds of buyers, so one seat runs one at a time and [`SEAT_JOBS`]
//! seats' run at once over the whole stack (thirty at once would drown two
//! cores); the others are told to try again in a moment.

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;

use super::key;
use crate::store::{Conn, StoreError};

/// Seats' jobs running at once, stack-wide.
pub const SEAT_JOBS: usize = 3;

/// What a seat's SKUs start with: `seat-ID-` (the variant's name follows).
pub fn sku_prefix(seat: &str) -> String {
    format!("seat-{seat}-")
}

/// Why a seat's job cannot start.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The seat runs one already.
    Seat,
    /// [`SEAT_JOBS`] seats do.
    Class,
}

impl Refused {
    pub fn why(&self) -> String {
        match self {
            Refused::Seat => {
                "your experiment or run is still going; wait for it to finish".to_owned()
            }
            Refused::Class => {
                format!("{SEAT_JOBS} seats' experiments or runs are going; try again in a moment")
            }
        }
    }
}

/// The sorted set of the seats whose job runs, scored by when its claim
/// expires (should the job's process die without a word).
fn running_key() -> String {
    key("jobs")
}

/// Claims a job for `seat`: 1, or 0 when the seat runs one already, -1
/// when [`SEAT_JOBS`] seats do. Expired claims go first.
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

/// Claims a job of at most `limit` for `seat`, or says why not.
pub async fn claim(
    conn: &mut Conn,
    seat: &str,
    limit: Duration,
) -> Result<Result<(), Refused>, StoreError> {
    let now = super::now_ms();
    let claimed: i64 = CLAIM
        .key(running_key())
        .arg(now)
        .arg(now + limit.as_millis() as u64)
        .arg(seat)
        .arg(SEAT_JOBS)
        .invoke_async(conn)
        .await?;
    Ok(match claimed {
        1 => Ok(()),
        0 => Err(Refused::Seat),
        _ => Err(Refused::Class),
    })
}

/// `seat`'s next job may start.
pub async fn release(conn: &mut Conn, seat: &str) -> Result<(), StoreError> {
    let _: i64 = redis::cmd("ZREM")
        .arg(running_key())
        .arg(seat)
        .query_async(conn)
        .await?;
    Ok(())
}
