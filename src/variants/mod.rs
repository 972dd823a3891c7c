//! The protection strategies, one file each, behind one small trait.
//!
//! Every variant runs the same [`crate::section::critical_section`]; they differ
//! only in what surrounds it. [`Variant`] is the set of them: parsed from the
//! URL, listed by the API, iterated by the dashboard and the load generator.
//!
//! # Adding a variant
//!
//! Every place a new variant touches:
//!
//! 1. A new file here, `variants/<name>.rs`, opening with what it does, what
//!    breaks it and the scenario that shows it; its [`About`] (its name,
//!    the teaching text in English and Chinese, the code that matters, its
//!    default lease and wait, its [`Claims`] in every lab scenario, which
//!    the compiler makes complete, why it under-sells if it does, and the
//!    facts of what it is: whether it is one script, where its stock
//!    lives, who checks its ids, where its answers are counted, whether it
//!    takes a lock, makes orders or splits the stock, which lock store it
//!    needs); and its `Protection` around the critical section.
//! 2. In this file: its `mod` line; an arm in [`Variant`] and in
//!    [`Variant::ALL`] (its length too) and [`Variant::about`]; an arm in
//!    [`Protections::deduct`], and a field of [`Protections`] if it keeps
//!    state in the process. Everything else asks its [`About`].
//! 3. By hand, outside the code: the default list of `loadtest/oha.sh`,
//!    any test list of a specific kind of variant it belongs to (e.g. the
//!    ones that oversell with two instances in `tests/api/stack.rs`), and
//!    the variant tables and lists of `README.md` and `docs/`, which the
//!    docs tests check. `docs/adding-a-variant.md` walks through each step.
//!
//! Nothing else names the variants: the API (`/api/variants`), the
//! dashboard's cards, the SKUs `up` stocks, `load --variant all`, the lab's
//! matrix, the command line's help, the k6 script and the tests that mean
//! "every variant" all iterate [`Variant::ALL`] or read `/api/variants`.

mod about;
mod claims;
mod claims_zh;
mod etcd;
mod family;
mod fenced;
mod lane;
mod local_mutex;
mod lua;
mod lua_batch;
mod lua_sharded;
mod lua_stream;
mod lua_then_queue;
mod none;
mod pg_advisory;
mod pg_batch;
mod pg_common;
mod pg_for_update;
mod pg_optimistic;
mod pg_update;
mod redis_then_pg;
mod redlock;
mod scenario;
mod setnx;
mod setnx_expiry;
mod support;
mod token;
mod watchdog;
mod zookeeper;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

pub use self::about::{About, Counted, Facts, Needs, Reason};
pub use self::claims::{Behaviour, Claim, Claims};
pub use self::claims_zh::note_zh;
pub use self::scenario::{Scenario, UnknownScenario};
use self::support::{
    LockTimer, Spin, after_release, count_tenure, fenced_section, lock_store_error, not_acquired,
    not_replicated, replicated, unconfigured,
};
use crate::knobs::Knobs;
use crate::section::{Answer, Ctx};
use crate::store::StoreError;

/// Every variant of the lab.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Variant {
    None,
    LocalMutex,
    Setnx,
    SetnxExpiry,
    Token,
    Watchdog,
    Fenced,
    Redlock,
    Etcd,
    ZooKeeper,
    Lua,
    LuaBatch,
    LuaSharded,
    LuaThenQueue,
    LuaStream,
    PgUpdate,
    PgForUpdate,
    PgOptimistic,
    PgAdvisory,
    PgBatch,
    RedisThenPg,
}

impl Variant {
    /// All of them, in teaching order: from no protection to the right answer.
    pub const ALL: [Variant; 21] = [
        Variant::None,
        Variant::LocalMutex,
        Variant::Setnx,
        Variant::SetnxExpiry,
        Variant::Token,
        Variant::Watchdog,
        Variant::Fenced,
        Variant::Redlock,
        Variant::Etcd,
        Variant::ZooKeeper,
        Variant::Lua,
        Variant::LuaBatch,
        Variant::LuaSharded,
        Variant::LuaThenQueue,
        Variant::LuaStream,
        Variant::PgUpdate,
        Variant::PgForUpdate,
        Variant::PgOptimistic,
        Variant::PgAdvisory,
        Variant::PgBatch,
        Variant::RedisThenPg,
    ];

    /// The name in URLs, JSON and on the dashboard.
    pub fn name(self) -> &'static str {
        self.about().name
    }

    /// What the dashboard and `/api/variants` say about it.
    pub fn about(self) -> &'static About {
        match self {
            Variant::None => &none::ABOUT,
            Variant::LocalMutex => &local_mutex::ABOUT,
            Variant::Setnx => &setnx::ABOUT,
            Variant::SetnxExpiry => &setnx_expiry::ABOUT,
            Variant::Token => &token::ABOUT,
            Variant::Watchdog => &watchdog::ABOUT,
            Variant::Fenced => &fenced::ABOUT,
            Variant::Redlock => &redlock::ABOUT,
            Variant::Etcd => &etcd::ABOUT,
            Variant::ZooKeeper => &zookeeper::ABOUT,
            Variant::Lua => &lua::ABOUT,
            Variant::LuaBatch => &lua_batch::ABOUT,
            Variant::LuaSharded => &lua_sharded::ABOUT,
            Variant::LuaThenQueue => &lua_then_queue::ABOUT,
            Variant::LuaStream => &lua_stream::ABOUT,
            Variant::PgUpdate => &pg_update::ABOUT,
            Variant::PgForUpdate => &pg_for_update::ABOUT,
            Variant::PgOptimistic => &pg_optimistic::ABOUT,
            Variant::PgAdvisory => &pg_advisory::ABOUT,
            Variant::PgBatch => &pg_batch::ABOUT,
            Variant::RedisThenPg => &redis_then_pg::ABOUT,
        }
    }

    /// The names of all variants, for error messages.
    pub fn names() -> Vec<String> {
        Self::ALL.iter().map(|v| v.name().to_owned()).collect()
    }

    /// Every variant's and scenario's name: the lab's identifiers, which
    /// the Chinese texts keep as they are (`Said::stray_english`'s allowed).
    pub fn and_scenario_names() -> Vec<&'static str> {
        (Self::ALL.iter().map(|v| v.name()))
            .chain(Scenario::ALL.iter().map(|s| s.name()))
            .collect()
    }

    /// Whether the whole sale is one script: [`Facts::scripted`].
    pub fn scripted(self) -> bool {
        self.about().facts.scripted
    }

    /// Whether its stock and ledger live in PostgreSQL:
    /// [`Facts::stock_in_postgres`].
    pub fn stock_in_postgres(self) -> bool {
        self.about().facts.stock_in_postgres
    }

    /// Whether its sales become orders: [`Facts::orders`].
    pub fn orders(self) -> bool {
        self.about().facts.orders
    }

    /// Whether it takes a lock: [`Facts::takes_lock`].
    pub fn takes_lock(self) -> bool {
        self.about().facts.takes_lock
    }

    /// How long a request waits for the lock: its `wait_ms`, or the
    /// variant's default (none: fail fast).
    pub fn wait(self, knobs: &Knobs) -> Duration {
        patience(knobs, self.about())
    }

    /// Why this instance cannot serve the variant: the lock store it needs
    /// was not given (`None`: it can).
    pub fn missing_store(self, stores: &crate::lock::LockStores) -> Option<&'static str> {
        let needs = self.about().facts.needs?;
        (!needs.given(stores)).then(|| needs.missing())
    }

    /// How many buckets a reset for this variant splits the stock into:
    /// [`crate::knobs::DEFAULT_BUCKETS`] for `lua-sharded`, 0 (one key) for the rest.
    pub fn buckets(self) -> u32 {
        self.about().facts.buckets
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The name did not match any variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownVariant(pub String);

impl FromStr for Variant {
    type Err = UnknownVariant;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|v| v.name() == name)
            .ok_or_else(|| UnknownVariant(name.to_owned()))
    }
}

impl Ctx<'_> {
    /// The lease asked for, or the variant's default.
    fn lease(&self, about: &About) -> Duration {
        self.knobs
            .lease
            .or(about.default_lease)
            .unwrap_or(DEFAULT_LEASE)
    }

    /// The wait asked for, or the variant's default.
    fn wait(&self, about: &About) -> Duration {
        patience(self.knobs, about)
    }
}

/// The wait asked for, or the variant's default; none: fail fast.
fn patience(knobs: &Knobs, about: &About) -> Duration {
    knobs.wait.or(about.default_wait).unwrap_or(Duration::ZERO)
}

/// Lease of every lock variant unless the request says otherwise: Redisson's 30 s.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// One protection strategy around the critical section.
trait Protection {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError>;
}

/// The variants' process-wide state, one field per variant that keeps any
/// (`local-mutex`: a mutex per SKU; `lua-batch` and `pg-batch`: a queue per SKU;
/// `lua-sharded`: each SKU's bucket count as last seen; `lua-stream`: when
/// it last put each SKU in the workers' registry), and the dispatch of a
/// request to its variant.
#[derive(Default)]
pub struct Protections {
    local_mutex: local_mutex::LocalMutex,
    batch: lua_batch::LuaBatch,
    pg_batch: pg_batch::PgBatch,
    sharded: lua_sharded::ShardedScript,
    stream: lua_stream::LuaStream,
    redis_then_pg: redis_then_pg::RedisThenPg,
}

pub use self::lua_batch::{DEFAULT_BATCH_MAX, MAX_BATCH_MAX};

/// The sale scripts as the instances send them, for tests that run them
/// side by side on a real Redis: `lua`'s one-buyer sale (`deduct.lua`)
/// and `lua-batch`'s coalesced batch (`deduct_batch.lua`), with the keys
/// of a SKU in their order.
#[doc(hidden)]
pub mod sale_scripts {
    pub use super::lua::{DEDUCT as ONE, deduct_keys as keys};
    pub use super::lua_batch::DEDUCT_BATCH as BATCH;
}

impl Protections {
    pub fn new() -> Self {
        Self::default()
    }

    /// `lua-batch` sends up to `max` buyers of a SKU per call, `pg-batch`
    /// per transaction.
    pub fn with_batch_max(max: usize) -> Self {
        Self {
            batch: lua_batch::LuaBatch::new(max),
            pg_batch: pg_batch::PgBatch::new(max),
            ..Self::default()
        }
    }

    /// Runs one request through `variant`; a scheduled one stops at the
    /// gates before it takes its lock and after it let go (for the `lua`
    /// family: before and after its script).
    pub async fn deduct(&self, variant: Variant, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        ctx.hook.at(crate::gate::points::BEFORE_ACQUIRE).await;
        let answer = self.dispatch(variant, ctx).await;
        ctx.hook.at(crate::gate::points::AFTER_RELEASE).await;
        answer
    }

    async fn dispatch(&self, variant: Variant, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        match variant {
            Variant::None => none::NoLock.deduct(ctx).await,
            Variant::LocalMutex => self.local_mutex.deduct(ctx).await,
            Variant::Setnx => setnx::SetnxLock.deduct(ctx).await,
            Variant::SetnxExpiry => setnx_expiry::SetnxExpiryLock.deduct(ctx).await,
            Variant::Token => token::TokenLock.deduct(ctx).await,
            Variant::Watchdog => watchdog::WatchdogLock.deduct(ctx).await,
            Variant::Fenced => fenced::FencedLock.deduct(ctx).await,
            Variant::Redlock => redlock::RedlockLock.deduct(ctx).await,
            Variant::Etcd => etcd::EtcdVariant.deduct(ctx).await,
            Variant::ZooKeeper => zookeeper::ZooKeeperVariant.deduct(ctx).await,
            Variant::Lua => lua::LuaScript.deduct(ctx).await,
            Variant::LuaBatch => self.batch.deduct(ctx).await,
            Variant::LuaSharded => self.sharded.deduct(ctx).await,
            Variant::LuaThenQueue => lua_then_queue::LuaThenQueue.deduct(ctx).await,
            Variant::LuaStream => self.stream.deduct(ctx).await,
            Variant::PgUpdate => pg_update::PgUpdate.deduct(ctx).await,
            Variant::PgForUpdate => pg_for_update::PgForUpdate.deduct(ctx).await,
            Variant::PgOptimistic => pg_optimistic::PgOptimistic.deduct(ctx).await,
            Variant::PgAdvisory => pg_advisory::PgAdvisory.deduct(ctx).await,
            Variant::PgBatch => self.pg_batch.deduct(ctx).await,
            Variant::RedisThenPg => self.redis_then_pg.deduct(ctx).await,
        }
    }
}

#[cfg(test)]
mod tests;
