//! Classroom mode: a class on one stack. The teacher opens the classroom
//! (`up --classroom`, or the classroom page's switch); each student who
//! follows the join link gets a seat, a signed cookie ([`seal`]) instead
//! of the admin token. A seat may run step mode on runs of its own (each
//! on a SKU of its own), the lessons' experiments and its cards' Run and
//! Reset on SKUs of its own ([`jobs::sku_prefix`]; a few seats' at once,
//! [`jobs`]), never another seat's, and never a fault that hits the whole
//! stack: those stay the teacher's.
//!
//! Everything about the seats lives in Redis, under one hash tag, so every
//! instance admits the same seats: each seat's name and progress (a
//! hash that expires after [`SEAT_IDLE`] without a request), the cells it
//! broke, and a per-second count of its requests ([`SEAT_RATE`]).

pub mod jobs;
pub mod seal;

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

use redis::{AsyncCommands, Script};
use serde::Serialize;

use crate::store::{Store, StoreError};

/// A seat nobody uses for this long is gone (its cookie with it).
pub const SEAT_IDLE: Duration = Duration::from_secs(2 * 60 * 60);
/// Requests one seat may make in one second, over the whole stack.
pub const SEAT_RATE: u32 = 10;
/// A run whose last step is older than this shows its seat as stuck.
pub const STUCK: Duration = Duration::from_secs(3 * 60);
/// How many seats a classroom holds at once.
pub const MAX_SEATS: usize = 200;

fn key(what: &str) -> String {
    format!("{{stocklock:class}}:{what}")
}

fn seat_key(id: &str) -> String {
    key(&format!("seat:{id}"))
}

fn solved_key(id: &str) -> String {
    key(&format!("seat:{id}:solved"))
}

fn now_ms() -> u64 {
    crate::timeline::now_ns() / 1_000_000
}

/// Whether the classroom is open: students may join and use their seats.
pub async fn is_open(store: &Store) -> Result<bool, StoreError> {
    let mut conn = store.conn().await?;
    Ok(conn.exists(key("open")).await?)
}

/// Opens or closes the classroom. Closing it keeps the seats: opened
/// again, they go on where they were.
pub async fn set_open(store: &Store, open: bool) -> Result<(), StoreError> {
    let mut conn = store.conn().await?;
    let _: () = match open {
        true => conn.set(key("open"), 1).await?,
        false => conn.del(key("open")).await?,
    };
    Ok(())
}

/// A student's seat.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Seat {
    pub id: String,
    pub name: String,
}

/// Why a seat was not given.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error("the classroom is not open: ask the teacher to open it")]
    Closed,
    #[error("the classroom is full ({MAX_SEATS} seats)")]
    Full,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A name as a seat may carry it: letters, digits, spaces and `-`, at
/// most 24 characters; `None` when nothing is left.
pub fn clean_name(name: &str) -> Option<String> {
    let kept: String = name
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-')
        .take(24)
        .collect();
    let kept = kept.trim().to_owned();
    (!kept.is_empty()).then_some(kept)
}

/// Gives a new seat, named `name` (or "seat N").
pub async fn join(store: &Store, name: Option<&str>) -> Result<Seat, JoinError> {
    if !is_open(store).await? {
        return Err(JoinError::Closed);
    }
    prune(store).await?;
    if seated(store).await? >= MAX_SEATS {
        return Err(JoinError::Full);
    }
    Ok(seat_anew(store, name).await?)
}

/// How many seats the classroom holds.
async fn seated(store: &Store) -> Result<usize, StoreError> {
    let mut conn = store.conn().await?;
    Ok(conn.zcard(key("seats")).await?)
}

/// A new seat in the list of seats.
async fn seat_anew(store: &Store, name: Option<&str>) -> Result<Seat, StoreError> {
    let mut conn = store.conn().await?;
    let number: u64 = conn.incr(key("numbered"), 1).await?;
    let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
    let name = name
        .and_then(clean_name)
        .unwrap_or_else(|| format!("seat {number}"));
    let now = now_ms();
    let _: () = redis::pipe()
        .hset_multiple(
            seat_key(&id),
            &[("name", name.clone()), ("joined_ms", now.to_string())],
        )
        .pexpire(seat_key(&id), SEAT_IDLE.as_millis() as i64)
        .zadd(key("seats"), &id, now)
        .query_async(&mut conn)
        .await?;
    Ok(Seat { id, name })
}

/// What a seat's request is let do.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    Seat(Seat),
    /// No such seat (it expired, or the classroom is closed).
    Unknown,
    /// Past [`SEAT_RATE`] this second.
    RateLimited,
}

/// Counts a request of seat `id` and keeps the seat alive: the seat's
/// name when let in, 0 past the rate, -1 no such seat (or the classroom
/// is closed).
static ADMIT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('EXISTS', KEYS[4]) == 0 then return -1 end
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local n = redis.call('INCR', KEYS[2])
if n == 1 then redis.call('PEXPIRE', KEYS[2], 2000) end
if n > tonumber(ARGV[2]) then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[1], 'seen_ms', ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
redis.call('PEXPIRE', KEYS[5], ARGV[1])
return redis.call('HGET', KEYS[1], 'name')",
    )
});

/// Lets a request of seat `id` in, or says why not.
pub async fn admit(store: &Store, id: &str) -> Result<Admission, StoreError> {
    let now = now_ms();
    let mut conn = store.conn().await?;
    let admitted: redis::Value = ADMIT
        .key(seat_key(id))
        .key(key(&format!("rate:{id}:{}", now / 1000)))
        .key(key("seats"))
        .key(key("open"))
        .key(solved_key(id))
        .arg(SEAT_IDLE.as_millis() as u64)
        .arg(SEAT_RATE)
        .arg(now)
        .arg(id)
        .invoke_async(&mut conn)
        .await?;
    Ok(match admitted {
        redis::Value::Int(0) => Admission::RateLimited,
        redis::Value::Int(_) => Admission::Unknown,
        name => match redis::from_redis_value::<String>(name) {
            Ok(name) => Admission::Seat(Seat {
                id: id.to_owned(),
                name,
            }),
            Err(_) => Admission::Unknown,
        },
    })
}

/// Seat `id`, if it is still there (nothing counted, nothing refreshed).
pub async fn seat(store: &Store, id: &str) -> Result<Option<Seat>, StoreError> {
    let mut conn = store.conn().await?;
    let name: Option<String> = conn.hget(seat_key(id), "name").await?;
    Ok(name.map(|name| Seat {
        id: id.to_owned(),
        name,
    }))
}

/// Seat `id` started run `run` of `cell` (`variant/scenario`): the run it
/// had before, which it no longer needs.
pub async fn started(
    store: &Store,
    id: &str,
    run: &str,
    cell: &str,
) -> Result<Option<String>, StoreError> {
    let mut conn = store.conn().await?;
    let before: Option<String> = conn.hget(seat_key(id), "run").await?;
    let now = now_ms().to_string();
    let fields = [
        ("run", run),
        ("cell", cell),
        ("steps", "0"),
        ("over", "0"),
        ("violation", "0"),
        ("moved_ms", now.as_str()),
    ];
    let _: () = conn.hset_multiple(seat_key(id), &fields).await?;
    Ok(before.filter(|before| before != run))
}

/// Seat `id`'s run `run` took a step: it has `steps` now, is `over` or
/// not, and broke its cell or not (a broken cell is solved for good).
pub async fn stepped(
    store: &Store,
    id: &str,
    run: &str,
    (steps, over, violation): (usize, bool, bool),
) -> Result<(), StoreError> {
    let mut conn = store.conn().await?;
    let (current, cell): (Option<String>, Option<String>) = redis::cmd("HMGET")
        .arg(seat_key(id))
        .arg("run")
        .arg("cell")
        .query_async(&mut conn)
        .await?;
    if current.as_deref() != Some(run) {
        return Ok(());
    }
    let flag = |b: bool| if b { "1" } else { "0" };
    let now = now_ms().to_string();
    let steps = steps.to_string();
    let fields = [
        ("steps", steps.as_str()),
        ("over", flag(over)),
        ("violation", flag(violation)),
        ("moved_ms", now.as_str()),
    ];
    let mut pipe = redis::pipe();
    pipe.hset_multiple(seat_key(id), &fields);
    if violation && let Some(cell) = cell {
        pipe.sadd(solved_key(id), cell)
            .pexpire(solved_key(id), SEAT_IDLE.as_millis() as i64);
    }
    let _: () = pipe.query_async(&mut conn).await?;
    Ok(())
}

/// One seat as the teacher's board shows it.
#[derive(Clone, Debug, Serialize)]
pub struct SeatRow {
    pub id: String,
    pub name: String,
    pub joined_ms: u64,
    pub seen_ms: u64,
    /// The cell of its current run (`variant/scenario`), its steps, and
    /// whether it is over and broke the cell.
    pub cell: Option<String>,
    pub run: Option<String>,
    pub steps: u64,
    pub over: bool,
    pub violation: bool,
    /// Its current run has not moved for [`STUCK`] and is not over.
    pub stuck: bool,
    /// The cells it broke, in order.
    pub solved: Vec<String>,
}

/// Drops the seats whose hash expired from the list of seats.
async fn prune(store: &Store) -> Result<(), StoreError> {
    let mut conn = store.conn().await?;
    let cutoff = now_ms().saturating_sub(SEAT_IDLE.as_millis() as u64);
    let _: () = conn.zrembyscore(key("seats"), 0, cutoff).await?;
    Ok(())
}

/// Every seat, the longest-seated first.
pub async fn board(store: &Store) -> Result<Vec<SeatRow>, StoreError> {
    prune(store).await?;
    let mut conn = store.conn().await?;
    let ids: Vec<String> = conn.zrange(key("seats"), 0, -1).await?;
    // Every seat's hash and cells broken, in one round trip (the board is
    // read each second while the teacher's page is open).
    let mut reads = redis::pipe();
    for id in &ids {
        reads.hgetall(seat_key(id)).smembers(solved_key(id));
    }
    let seats: Vec<(HashMap<String, String>, Vec<String>)> = match ids.is_empty() {
        true => Vec::new(),
        false => reads.query_async(&mut conn).await?,
    };
    let mut rows = Vec::new();
    let mut gone = Vec::new();
    let now = now_ms();
    for (id, (fields, mut solved)) in ids.into_iter().zip(seats) {
        let Some(name) = fields.get("name").cloned() else {
            gone.push(id);
            continue;
        };
        let number = |field: &str| fields.get(field).and_then(|v| v.parse::<u64>().ok());
        solved.sort();
        let over = fields.get("over").is_some_and(|v| v == "1");
        let run = fields.get("run").cloned();
        let moved = number("moved_ms").unwrap_or(0);
        rows.push(SeatRow {
            name,
            joined_ms: number("joined_ms").unwrap_or(0),
            seen_ms: number("seen_ms").unwrap_or(0),
            cell: fields.get("cell").cloned(),
            steps: number("steps").unwrap_or(0),
            violation: fields.get("violation").is_some_and(|v| v == "1"),
            stuck: run.is_some() && !over && now.saturating_sub(moved) > STUCK.as_millis() as u64,
            over,
            run,
            solved,
            id,
        });
    }
    // Seats whose hash expired (idle for SEAT_IDLE) leave the list.
    if !gone.is_empty() {
        let _: () = conn.zrem(key("seats"), &gone).await?;
    }
    rows.sort_by_key(|row| row.joined_ms);
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::clean_name;

    #[test]
    fn a_seat_name_keeps_letters_digits_spaces_and_dashes() {
        assert_eq!(clean_name(" Ada <b>L</b> "), Some("Ada bLb".to_owned()));
        assert_eq!(clean_name("李雷-2"), Some("李雷-2".to_owned()));
        assert_eq!(clean_name("<>/;"), None);
        assert_eq!(clean_name(&"x".repeat(40)).unwrap().len(), 24);
    }
}
