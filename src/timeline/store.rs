//! Where the timeline lives in Redis: a SKU's list of batches of sections,
//! each batch one element `COUNT|JSON` (one instance's count-in, which
//! appends it with `append_sections`, in `ledger::count_in`), the JSON a
//! positional array per section (no field names: the list holds thousands).

use redis::AsyncCommands;

use super::{KEEP, Section};
use crate::store::{Conn, Keys, StoreError};

/// The Lua function `append_sections(sections, ledger, batch, count,
/// keep)`: one batch onto a SKU's timeline, the oldest dropped past `keep`.
pub const APPEND_SECTIONS_LUA: &str = include_str!("append_sections.lua");

/// A section as the list keeps it: its fields in order, no names.
type Packed = (
    String,
    Option<String>,
    u64,
    u64,
    Option<u64>,
    String,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<u64>,
    Vec<u64>,
    bool,
);

/// [`Packed`], borrowed: what a flush writes, with nothing copied.
type PackedRef<'a> = (
    &'a str,
    Option<&'a str>,
    u64,
    u64,
    Option<u64>,
    &'a str,
    Option<&'a str>,
    Option<i64>,
    Option<&'a str>,
    Option<u64>,
    &'a [u64],
    bool,
);

fn pack(s: &Section) -> PackedRef<'_> {
    (
        &s.instance,
        s.holder.as_deref(),
        s.enter_ns,
        s.exit_ns,
        s.release_ns,
        s.outcome.as_ref(),
        s.reason.as_deref(),
        s.unit,
        s.request_id.as_deref(),
        s.lease_ms,
        &s.renewals_ns,
        s.atomic,
    )
}

fn unpack(p: Packed) -> Section {
    let (instance, holder, enter_ns, exit_ns, release_ns, outcome, reason, unit, request_id) =
        (p.0, p.1, p.2, p.3, p.4, p.5, p.6, p.7, p.8);
    Section {
        instance,
        holder,
        enter_ns,
        exit_ns,
        release_ns,
        outcome: outcome.into(),
        reason,
        unit,
        request_id,
        lease_ms: p.9,
        renewals_ns: p.10,
        atomic: p.11,
    }
}

/// `sections` as one element of the list: `COUNT|JSON`.
pub fn batch(sections: &[Section]) -> String {
    let packed: Vec<PackedRef<'_>> = sections.iter().map(pack).collect();
    let json = serde_json::to_string(&packed).unwrap_or_else(|_| "[]".to_owned());
    format!("{}|{json}", sections.len())
}

/// The sections recorded for a SKU (the last [`KEEP`]), in the order they began.
pub async fn sections(conn: &mut Conn, keys: &Keys) -> Result<Vec<Section>, StoreError> {
    let batches: Vec<String> = conn.lrange(&keys.sections, 0, -1).await?;
    let mut sections: Vec<Section> = batches
        .iter()
        .filter_map(|batch| batch.split_once('|'))
        .filter_map(|(_, json)| serde_json::from_str::<Vec<Packed>>(json).ok())
        .flatten()
        .map(unpack)
        .collect();
    sections.sort_by_key(|s| s.enter_ns);
    let extra = sections.len().saturating_sub(KEEP);
    sections.drain(..extra);
    Ok(sections)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_section_packs_and_unpacks_whole() {
        let mut s = Section::timed("a", Some("a:1#7"), 10, "busy");
        s.release_ns = Some(30);
        s.reason = Some("stale_token".to_owned());
        s.unit = Some(3);
        s.request_id = Some("r-1".to_owned());
        s.lease_ms = Some(300);
        s.renewals_ns = vec![12, 14];
        let json = serde_json::to_string(&pack(&s)).unwrap();
        assert_eq!(unpack(serde_json::from_str(&json).unwrap()), s);
    }
}
