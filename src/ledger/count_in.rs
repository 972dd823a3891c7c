//! An instance's count-in of one SKU: the answers it gave without a write
//! to Redis and the sections it ran, added to the SKU's ledger and
//! timeline in one step that is applied at most once, however often it is
//! sent (`count_in.lua`). A count-in sent into a paused Redis may time out
//! and still run once Redis wakes; sent again, it must not count twice.

use std::sync::LazyLock;

use redis::Script;

use crate::store::{Conn, Keys, StoreError};
use crate::timeline::{self, KEEP, Section};

static COUNT_IN: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{}\n{}",
        timeline::APPEND_SECTIONS_LUA,
        include_str!("count_in.lua")
    ))
});

/// What one count-in of a SKU carries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CountIn {
    /// Increasing per counter and SKU: a number the ledger applied already
    /// marks a copy.
    pub number: u64,
    pub unknown: u64,
    /// The instance's share of the SKU's answers.
    pub served: u64,
    pub mark_refusals: u64,
    /// Replays and busy answers no script counted (the database's variants).
    pub replays: u64,
    pub busy: u64,
    pub sections: Vec<Section>,
}

/// Whether a count-in was applied now or had been before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    Now,
    /// A copy of one applied before (its first send ran after all).
    Before,
}

/// Applies `count` of `instance` (counting as `counter`: its name and a
/// nonce of its process) to the SKU of `keys`, unless applied before.
pub async fn count_in(
    conn: &mut Conn,
    keys: &Keys,
    instance: &str,
    counter: &str,
    count: &CountIn,
) -> Result<Counted, StoreError> {
    let batch = if count.sections.is_empty() {
        String::new()
    } else {
        timeline::batch(&count.sections)
    };
    let applied: i64 = COUNT_IN
        .key(&keys.ledger)
        .key(&keys.served)
        .key(&keys.sections)
        .arg(instance)
        .arg(counter)
        .arg(count.number)
        .arg(count.unknown)
        .arg(count.served)
        .arg(count.mark_refusals)
        .arg(batch)
        .arg(count.sections.len())
        .arg(KEEP)
        .arg(count.replays)
        .arg(count.busy)
        .invoke_async(conn)
        .await?;
    Ok(if applied == 1 {
        Counted::Now
    } else {
        Counted::Before
    })
}
