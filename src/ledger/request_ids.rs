//! Request ids: an attempt's claim on its id, the answers that sold
//! nothing counted and the claim settled, kept for retries or freed.

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;
use redis::aio::ConnectionLike;

use super::{millis, with_ledger};
use crate::outcome::{Answer, BusyReason, Outcome};
use crate::store::{Keys, StoreError};

static CLAIM: LazyLock<Script> =
    LazyLock::new(|| with_ledger(include_str!("../scripts/claim.lua")));
static ANSWERED: LazyLock<Script> =
    LazyLock::new(|| with_ledger(include_str!("../scripts/answered.lua")));

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
