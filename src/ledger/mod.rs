//! The ledger: the truth that every number of the lab is read from.
//!
//! Measurement must never depend on the variant being measured. A sale is
//! recorded by the same script that writes the stock (`sell.lua` for the
//! lock variants, `deduct.lua` for the scripted ones), so a stock change
//! without its record, or a record without its stock change, cannot happen
//! in any variant. The ledger holds the sold counter, how often each unit
//! was sold, the other answers (busy, replays), requests per instance, and
//! each request id's outcome. `oversold` and `duplicates` are derived from
//! these, never from what a variant believes it did; `oversold` can never be
//! negative, and a negative figure means the ledger itself broke.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use redis::Script;
use redis::aio::ConnectionLike;

use std::time::Duration;

use crate::knobs::MAX_BUCKETS;
use crate::outcome::{Answer, BusyReason, Outcome};
use crate::store::{Keys, StoreError};
use crate::wire::{LockState, StateSnapshot};

mod count_in;
mod reset;

pub use count_in::{CountIn, Counted, count_in};
pub use reset::{RESET_CHANNEL, bucket_share, reset_sku, reset_sku_unannounced, timeline_off};

/// The shared Lua functions of the ledger (`record(...)`) and of request
/// ids (`now_ms()`, `claim_deadline(...)`, `owns(...)`); scripts that record
/// start with them.
pub const LEDGER_LUA: &str = include_str!("../scripts/ledger.lua");

/// The shared Lua function `admit(ledger, token)` of fencing tokens.
pub const FENCE_LUA: &str = include_str!("../scripts/fence.lua");

/// Builds a script whose body may call the ledger's functions.
pub fn with_ledger(body: &str) -> Script {
    Script::new(&format!("{LEDGER_LUA}\n{body}"))
}

static CLAIM: LazyLock<Script> =
    LazyLock::new(|| with_ledger(include_str!("../scripts/claim.lua")));
static ANSWERED: LazyLock<Script> =
    LazyLock::new(|| with_ledger(include_str!("../scripts/answered.lua")));
static RESET: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/reset.lua")));
static STATE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/state.lua")));

/// How long a claimed request id stands beyond the time its attempt may
/// legitimately take (its wait for the lock and its business work) before a
/// retry may take it over, measured on Redis's clock from the claim.
pub const CLAIM_GRACE: Duration = Duration::from_secs(2);

/// The claim an attempt holds on its request id: while it stands, other
/// attempts with the id are told `in_progress`, and only this attempt's
/// write may sell under the id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim<'a> {
    pub id: &'a str,
    /// Unique to the attempt; the write script checks the claim still carries it.
    pub token: String,
}

/// Milliseconds for a script.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What claiming a request id found.
#[derive(Debug)]
pub enum Claimed<'a> {
    /// The id is this attempt's now (fresh, or taken over from an attempt
    /// that outlived its deadline).
    Yes(Claim<'a>),
    /// Answered without selling, and counted: the id's first answer repeated
    /// (a replay), or `in_progress` while another attempt holds it.
    Decided(Answer),
}

/// How long a request id's record is kept (its outcome for retries) unless
/// an instance is told otherwise (`--request-ttl`): a retry later than this
/// is a new request.
pub const DEFAULT_REQUEST_TTL: Duration = Duration::from_secs(3600);

/// How many request ids a SKU remembers at most unless an instance is told
/// otherwise (`--request-ids-per-sku`): a new id past it is answered busy
/// (`request_ids_full`, 429), so distinct ids cannot grow Redis without
/// bound (~250 bytes an id: 25 MB a SKU).
pub const DEFAULT_REQUEST_IDS_PER_SKU: u64 = 100_000;

/// How long a sold-out answer's record is kept: repeating it is safe (it
/// sold nothing), so it need not hold a place for the whole TTL.
pub const SOLD_OUT_KEEP: Duration = Duration::from_secs(10);

/// Claims `id` for one attempt for `hold` (then a retry may take it over),
/// or answers from its record. One script, counting the answers it gives;
/// it also forgets a few ids older than `ttl`, and refuses a new id when
/// the SKU remembers `cap` already.
pub async fn claim<'a, C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    instance: &str,
    id: &'a str,
    hold: Duration,
    (ttl, cap): (Duration, u64),
) -> Result<Claimed<'a>, StoreError> {
    let token = uuid::Uuid::new_v4().simple().to_string();
    let (kind, record): (String, String) = CLAIM
        .key(&keys.requests)
        .key(&keys.ledger)
        .key(&keys.served)
        .key(&keys.request_times)
        .arg(id)
        .arg(&token)
        .arg(millis(hold))
        .arg(instance)
        .arg(millis(ttl))
        .arg(cap)
        .invoke_async(conn)
        .await?;
    let in_progress = || Answer::recorded(Outcome::Busy(BusyReason::InProgress), false);
    Ok(match kind.as_str() {
        "claimed" => Claimed::Yes(Claim { id, token }),
        "full" => Claimed::Decided(Answer::recorded(
            Outcome::Busy(BusyReason::RequestIdsFull),
            false,
        )),
        "done" => Claimed::Decided(match Outcome::decode(&record) {
            Some(outcome) => Answer::recorded(outcome, true),
            None => in_progress(),
        }),
        _ => Claimed::Decided(in_progress()),
    })
}

/// An answer that sold nothing, as the ledger counts it. Sales are counted
/// by the write that makes them ([`crate::section`]), never here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerKind {
    SoldOut,
    Busy,
    /// A retry answered from its request id's record.
    Replay,
    /// Not counted (a SKU never stocked): only the claim is settled.
    Uncounted,
}

impl AnswerKind {
    fn as_str(self) -> &'static str {
        match self {
            AnswerKind::SoldOut => "sold_out",
            AnswerKind::Busy => "busy",
            AnswerKind::Replay => "replay",
            AnswerKind::Uncounted => "",
        }
    }
}

/// Counts one answer that sold nothing, and settles the request id's claim
/// when `claim` is this attempt's: a final `outcome` (sold out) is kept for
/// retries ([`SOLD_OUT_KEEP`] of the `ttl` ids are remembered), anything
/// else frees the id for a retry to try again.
pub async fn record_answer<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    (instance, kind): (&str, AnswerKind),
    claim: Option<&Claim<'_>>,
    outcome: &Outcome,
    ttl: Duration,
) -> Result<(), StoreError> {
    let record = outcome.encode().map(|record| (record, ttl));
    answered(conn, keys, instance, kind, claim, record).await
}

/// The live mutant `no-claim-fence`'s: the id's claim made this attempt's
/// again, whatever stands there (a retry's claim, its final record).
pub async fn take_claim_back<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    claim: &Claim<'_>,
) -> Result<(), StoreError> {
    let mine = format!("pending:{}:{}", claim.token, i64::MAX);
    let _: i64 = redis::cmd("HSET")
        .arg(&keys.requests)
        .arg(claim.id)
        .arg(mine)
        .query_async(conn)
        .await?;
    Ok(())
}

/// Frees a request id this attempt claimed and never got to use (nothing
/// was written), so that a retry need not wait for the claim's deadline.
pub async fn free_claim<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    claim: &Claim<'_>,
) -> Result<(), StoreError> {
    answered(conn, keys, "", AnswerKind::Uncounted, Some(claim), None).await
}

/// `answered.lua`: counts `kind` for `instance`, and settles `claim` by
/// keeping `record` for the id, ids being remembered for the duration given
/// with it (`None`: frees the id).
async fn answered<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    instance: &str,
    kind: AnswerKind,
    claim: Option<&Claim<'_>>,
    record: Option<(String, Duration)>,
) -> Result<(), StoreError> {
    let (record, ttl) = record.unzip();
    let _: i64 = ANSWERED
        .key(&keys.ledger)
        .key(&keys.served)
        .key(&keys.requests)
        .key(&keys.request_times)
        .arg(instance)
        .arg(kind.as_str())
        .arg(claim.map_or("", |c| c.id))
        .arg(claim.map_or("", |c| c.token.as_str()))
        .arg(record.unwrap_or_default())
        .arg(ttl.map_or(0, millis))
        .arg(millis(SOLD_OUT_KEEP))
        .invoke_async(conn)
        .await?;
    Ok(())
}

/// Whether the SKU was ever stocked (reset, or seeded): only then does it
/// have an epoch.
pub async fn is_stocked<C: ConnectionLike>(conn: &mut C, keys: &Keys) -> Result<bool, StoreError> {
    Ok(redis::cmd("HEXISTS")
        .arg(&keys.ledger)
        .arg("epoch")
        .query_async(conn)
        .await?)
}

/// A counter of the ledger that is added to outside any sale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// Answers of `unknown` outcome an instance gave (counted after the
    /// fact: when it gave them, Redis was not answering).
    Unknown,
    /// Leases a watchdog could not keep.
    LostLocks,
    /// Renewals a watchdog made while its owner held the lock.
    Renewals,
    /// Steps after a written sale that failed (its order's enqueue or
    /// registration, a chaos check): the sale stood and was answered sold.
    PostSaleFailures,
    /// Buyers an instance refused from its sold-out mark (counted after
    /// the fact, with its other answers given without Redis).
    MarkRefusals,
}

impl Counter {
    fn field(self) -> &'static str {
        match self {
            Counter::Unknown => "unknown",
            Counter::LostLocks => "lost_locks",
            Counter::Renewals => "renewals",
            Counter::PostSaleFailures => "post_sale_failures",
            Counter::MarkRefusals => "mark_refusals",
        }
    }
}

/// Adds `n` to one of a SKU's counters.
pub async fn add<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    counter: Counter,
    n: u64,
) -> Result<(), StoreError> {
    let _: i64 = redis::cmd("HINCRBY")
        .arg(&keys.ledger)
        .arg(counter.field())
        .arg(n)
        .query_async(conn)
        .await?;
    Ok(())
}

/// (stock, initial, sold, duplicates, busy, lost_locks, renewals,
/// fenced_rejections, replays, buckets, unknown, returned), pttl, type of
/// the lock, holder, served, (mark_refusals, post_sale_failures).
type RawState = (
    (i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64),
    i64,
    String,
    Option<String>,
    Vec<String>,
    (Option<i64>, Option<i64>),
);

/// Redis's memory in use and its limit (`INFO memory`); `None` when Redis
/// does not say (a cluster answers per node), which a state shows as absent.
pub async fn redis_memory<C: ConnectionLike>(conn: &mut C) -> Option<crate::wire::RedisMemory> {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(conn)
        .await
        .ok()?;
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|value| value.trim().parse().ok())
    };
    Some(crate::wire::RedisMemory {
        used_bytes: field("used_memory")?,
        max_bytes: field("maxmemory")?,
    })
}

/// A snapshot of a SKU: one script; for a SKU split into buckets, the sum
/// of its buckets (each read by one script: consistent per bucket, not
/// across them).
pub async fn snapshot<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    sku: &str,
) -> Result<StateSnapshot, StoreError> {
    let mut total = snapshot_one(conn, keys, sku).await?;
    for b in 0..total.buckets {
        total.absorb(&snapshot_one(conn, &keys.bucket(b), sku).await?);
    }
    // One SKU: its oversell is derived from the sums, not summed.
    total.oversold = total.sold - total.returned - (total.initial - total.remaining);
    Ok(total)
}

async fn snapshot_one<C: ConnectionLike>(
    conn: &mut C,
    keys: &Keys,
    sku: &str,
) -> Result<StateSnapshot, StoreError> {
    let (
        (
            remaining,
            initial,
            sold,
            duplicates,
            busy,
            lost_locks,
            renewals,
            fenced_rejections,
            replays,
            buckets,
            unknown,
            returned,
        ),
        pttl,
        kind,
        holder,
        served,
        (mark_refusals, post_sale_failures),
    ): RawState = STATE
        .key(&keys.stock)
        .key(&keys.ledger)
        .key(&keys.units)
        .key(&keys.served)
        .key(&keys.lock)
        .invoke_async(conn)
        .await?;
    let per_instance: BTreeMap<String, i64> = served
        .chunks_exact(2)
        .map(|pair| (pair[0].clone(), pair[1].parse().unwrap_or(0)))
        .collect();
    let held = kind != "none";
    Ok(StateSnapshot {
        sku: sku.to_owned(),
        initial,
        remaining,
        sold,
        oversold: sold - returned - (initial - remaining),
        returned,
        duplicates,
        busy,
        lost_locks,
        fenced_rejections,
        replays,
        renewals,
        unknown,
        buckets: u32::try_from(buckets).unwrap_or(0).min(MAX_BUCKETS),
        mark_refusals: mark_refusals.unwrap_or(0),
        post_sale_failures: post_sale_failures.unwrap_or(0),
        per_instance,
        lock: LockState {
            held,
            holder: if held { holder } else { None },
            ttl_ms: (held && pttl >= 0).then_some(pttl),
            no_ttl: held && pttl == -1,
        },
    })
}
