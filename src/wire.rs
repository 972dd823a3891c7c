//! The JSON shapes that cross the wire.
//!
//! One module for all of them so the server, the dashboard and the load
//! generator cannot drift apart: they serialize and deserialize the same types.
//! The dashboard's own shapes (its board, instances and runs) are in
//! `wire/dashboard.rs`, re-exported here.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod dashboard;
mod orders;
mod reconciliation;
mod run;
pub mod said;
mod soak;

pub use dashboard::{Board, InstanceStatus, RunRequest, RunStatus};
pub use orders::{ORDER_TOKEN, OrderSummary, OrderView, OrdersCheck, OrdersView};
pub use reconciliation::Reconciliation;
pub use run::{ErrorCounts, HistoryJudgement, LatencyMs, LoadReport, RunReport, SkuResult, Unsold};
pub use said::Said;
pub use soak::{
    Recovery, RedisAtEnd, SOAK_STATUS_KEY, SoakFault, SoakOrders, SoakReport, SoakStatus,
    SoakVariant, SoakViolation, Unknowns,
};

/// What a `/deductStock` request ended as. Sold out and busy are outcomes of
/// the business, not errors; errors use [`ErrorBody`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    /// 200: one unit was sold.
    Sold,
    /// 409: the stock read was zero or less.
    SoldOut,
    /// 429: the lock could not be had in time (or was lost before the
    /// write). Nothing was sold.
    Busy,
    /// 503: the write was sent and no answer came: it may or may not have
    /// happened. A retry with the same `request_id` learns which.
    Unknown,
}

/// The body of every `/deductStock` answer that is not an error.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeductResponse {
    pub outcome: OutcomeKind,
    pub variant: String,
    pub sku: String,
    /// The unit sold: the stock value the request read. `None` unless sold.
    pub unit: Option<i64>,
    /// The stock this request saw left: after its write when sold, as read when
    /// sold out, `None` when busy (it never read the stock).
    pub remaining: Option<i64>,
    /// Which instance answered (`up` names them a, b, c, ...).
    pub instance: String,
    /// Why a request was busy (`lock_held`, `wait_timed_out`, `lock_lost`, `stale_token`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// True when this was a retry of a `request_id` already answered: the
    /// first answer, repeated, and nothing sold.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
    /// The request's idempotency key, echoed (with `unknown`, the key to
    /// retry with).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// A sentence for people, with `unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// True when the instance answered "sold out" from its sold-out mark,
    /// without asking Redis (see `sold_out_mark`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_mark: bool,
    /// An order variant's sale: the order's token, which paying it and
    /// finding it (`X-Order-Token`) take. Only the first answer carries it:
    /// a replay does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_token: Option<String>,
}

/// Every error answer: a stable machine-readable `error` code and a sentence
/// for people in `detail`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
    pub detail: String,
    /// For `unknown_variant`: the names that do exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid: Option<Vec<String>>,
}

/// The lock key of one SKU as Redis holds it right now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockState {
    /// Whether the lock key exists.
    pub held: bool,
    /// Who holds it: the owner token of a lease lock, the owner field of a
    /// reentrant lock, or the raw value a naive SETNX lock stores.
    pub holder: Option<String>,
    /// Milliseconds until the lease runs out; `None` when not held.
    pub ttl_ms: Option<i64>,
    /// Held with no expiry at all: the orphaned lock of a crash between SETNX
    /// and EXPIRE. Nobody will ever release it.
    pub no_ttl: bool,
}

/// A consistent snapshot of one SKU, read by one atomic script.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateSnapshot {
    pub sku: String,
    /// Stock set by the last reset.
    pub initial: i64,
    /// Stock left. Never clamped: a broken variant can drive it below zero.
    pub remaining: i64,
    /// Sales acknowledged with 200, counted by the ledger.
    pub sold: i64,
    /// Sales that no stock backs ([`oversold`]).
    pub oversold: i64,
    /// Units given back to the stock by expired reservations (the order
    /// pipeline), each once; they may be sold again.
    #[serde(default)]
    pub returned: i64,
    /// Units sold more than once.
    pub duplicates: i64,
    /// Requests answered 429.
    pub busy: i64,
    /// Leases the watchdog failed to keep (the holder learned it before writing).
    pub lost_locks: i64,
    /// Reads and writes the store refused for a stale fencing token.
    pub fenced_rejections: i64,
    /// Retries answered from the record (`request_id`), selling nothing.
    pub replays: i64,
    /// Lease renewals the watchdog made (counted when each holder releases).
    pub renewals: i64,
    /// Answers of `unknown` outcome (503: the write was sent, no answer
    /// came), counted once the instance reached Redis again. Their sales,
    /// if any, are in `sold` like every other.
    #[serde(default)]
    pub unknown: i64,
    /// How many buckets the stock is split into (`lua-sharded`; 0: one key).
    /// The other numbers are then the sums over the buckets.
    #[serde(default)]
    pub buckets: u32,
    /// Buyers an instance refused from its sold-out mark, without asking
    /// Redis (counted in `per_instance` too). Refusals while the SKU had
    /// stock (a reset or a give-back whose announcement had not arrived)
    /// are under-selling by marks.
    #[serde(default)]
    pub mark_refusals: i64,
    /// Steps after a written sale that failed (its order's enqueue or
    /// registration, a chaos check): each sale stood and was answered sold.
    #[serde(default)]
    pub post_sale_failures: i64,
    /// Requests answered, by instance.
    pub per_instance: BTreeMap<String, i64>,
    pub lock: LockState,
}

/// `GET /api/state`: the SKU's snapshot, and Redis's memory beside it (not
/// part of the snapshot: two reads of an unchanged SKU stay equal).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateView {
    #[serde(flatten)]
    pub snapshot: StateSnapshot,
    /// `None`: Redis did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_memory: Option<RedisMemory>,
}

/// How close Redis is to refusing writes: it evicts nothing
/// (`noeviction`), so at `max_bytes` every sale fails (503) until memory
/// is freed (a reset, ids forgotten).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedisMemory {
    pub used_bytes: u64,
    /// `maxmemory` (0: no limit).
    pub max_bytes: u64,
}

/// `POST /api/admin/reset`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResetRequest {
    pub sku: String,
    pub stock: i64,
    /// Split the stock over this many buckets (`lua-sharded`; 0 or absent: one key).
    #[serde(default)]
    pub buckets: u32,
    /// `false`: the `lua` family's scripts record no sections on this SKU's
    /// timeline (what the bench compares against); absent: they do. Lock
    /// variants always record theirs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<bool>,
}

/// What the teaching matrix expects of a variant: five columns, each the
/// text of the variant's claim for one of the lab's scenarios (race,
/// slow-business, crash-after-acquire, pause-holder, redlock-minority-down).
/// `"-"` marks a cell the scenario does not apply to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdicts {
    pub two_instances: String,
    pub work_exceeds_lease: String,
    pub crash_after_acquire: String,
    pub pause_exceeds_lease: String,
    pub redis_minority_down: String,
}

/// One entry of `GET /api/variants`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VariantInfo {
    pub name: String,
    /// One line: what protects the critical section.
    pub protection: String,
    /// One paragraph: what it does, what breaks it, which scenario shows it.
    pub explanation: String,
    /// The same two, in Chinese (the articles' language).
    pub protection_zh: String,
    pub explanation_zh: String,
    /// The few lines of code that matter.
    pub code: String,
    /// Defaults applied when the request does not say.
    pub default_lease_ms: Option<u64>,
    pub default_wait_ms: Option<u64>,
    pub expected: Verdicts,
    /// Why the variant is expected to under-sell a race (stock left on the
    /// shelf while buyers were refused), if it is: the fail-fast locks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undersells: Option<String>,
    /// The same, in Chinese.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undersells_zh: Option<String>,
    /// Its sales become orders in PostgreSQL (`lua-then-queue`,
    /// `lua-stream`): `GET /api/orders?sku=` shows them.
    #[serde(default)]
    pub orders: bool,
}

/// `GET /healthz`. Deliberately touches nothing but the process, so it is
/// the baseline that the cost of every variant is measured against.
/// `status` is `ok` (200), or `starting` (503) until the instance's
/// subscription to lock releases is live.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    pub status: String,
    pub instance: String,
    pub pid: u32,
}

/// Sales that no stock backs: `sold - returned - (initial - remaining)`,
/// the stock taken counted only down to zero. A store that decrements
/// past zero (a missing `remaining > 0`) took no unit for the sales below
/// it: they sold units that never existed, and count here, where the
/// plain difference would call them backed.
pub fn oversold(sold: i64, returned: i64, initial: i64, remaining: i64) -> i64 {
    sold - returned - (initial - remaining.max(0))
}

impl StateSnapshot {
    /// A SKU after `sold` sales left `remaining` of `initial`, with
    /// `oversold` derived as the ledger does (for tests of the judges).
    #[cfg(test)]
    pub(crate) fn counted(initial: i64, remaining: i64, sold: i64) -> Self {
        StateSnapshot {
            initial,
            remaining,
            sold,
            oversold: oversold(sold, 0, initial, remaining),
            ..StateSnapshot::default()
        }
    }

    /// Adds `other`'s counters and requests per instance to these (for the
    /// sum over a SKU's buckets, or over the SKUs of a run). `oversold` is
    /// added as it is; callers that sum parts of one SKU derive it again.
    pub fn absorb(&mut self, other: &StateSnapshot) {
        self.initial += other.initial;
        self.remaining += other.remaining;
        self.sold += other.sold;
        self.oversold += other.oversold;
        self.duplicates += other.duplicates;
        self.busy += other.busy;
        self.lost_locks += other.lost_locks;
        self.fenced_rejections += other.fenced_rejections;
        self.replays += other.replays;
        self.renewals += other.renewals;
        self.unknown += other.unknown;
        self.returned += other.returned;
        self.mark_refusals += other.mark_refusals;
        self.post_sale_failures += other.post_sale_failures;
        for (instance, n) in &other.per_instance {
            *self.per_instance.entry(instance.clone()).or_default() += n;
        }
    }
}

/// `POST /api/admin/chaos` (chaos mode only): one fault, armed or done.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum ChaosAction {
    /// The next request that acquires a lock crashes its process right
    /// after (`setnx`: between SETNX and EXPIRE, leaving a lock with no TTL).
    #[serde(alias = "crash_after_setnx")]
    CrashAfterAcquire,
    /// The next section that writes crashes its process right after the
    /// write, before it answers: the sale is recorded, its buyer never hears.
    CrashAfterWrite,
    /// Run the clock of the instance that takes this request `ms` ahead
    /// (negative: behind). Send it to the instance itself, not through nginx.
    ClockSkew { ms: i64 },
    /// The next request to enter a critical section freezes its whole
    /// process for `ms` right before its write (after its last check of the lock).
    PauseHolder { ms: u64 },
    /// Delete the SKU's lock key now, whoever holds it.
    LockVanishes { sku: String },
    /// The instance that takes this request aborts right after answering.
    Crash,
    /// The next sale of an order variant (`lua-then-queue`, `lua-stream`)
    /// crashes its process right after its sale script.
    CrashBeforeEnqueue,
    /// The next order worker to commit a batch crashes before acking it.
    WorkerCrashBeforeAck,
    /// Redis stops answering for `ms` (DEBUG SLEEP). Only when `up` owns the Redis.
    PauseRedis { ms: u64 },
    /// Redis shuts down without saving; `up` starts it again, empty. Only
    /// when `up` owns the Redis.
    RestartRedis,
    /// This instance's next PostgreSQL statement with `sql` runs; its answer is lost.
    LoseCommitAnswer { sql: String },
    /// This instance's connections to PostgreSQL carry nothing for `ms`,
    /// held open (a partition): what either side sends arrives after.
    PartitionPostgres { ms: u64 },
}

#[cfg(test)]
mod oversold_tests {
    use super::oversold;

    #[test]
    fn sales_past_zero_are_unbacked_and_a_lost_update_too() {
        assert_eq!(oversold(50, 0, 50, 0), 0);
        // Two buyers read 2 and both wrote 1: one unit gone, two sales.
        assert_eq!(oversold(2, 0, 2, 1), 1);
        // 400 sales of 50 by a decrement past zero: 350 units never existed.
        assert_eq!(oversold(400, 0, 50, -350), 350);
        // A unit given back and sold again is backed.
        assert_eq!(oversold(51, 1, 50, 0), 0);
    }
}
