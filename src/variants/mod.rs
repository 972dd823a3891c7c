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
//!    breaks it and the scenario that shows it; its [`About`] (the teaching
//!    text in English and Chinese, the code that matters, its default lease
//!    and wait, its [`Claims`] in every lab scenario, which the compiler
//!    makes complete, and why it under-sells if it does); and its
//!    `Protection` around the critical section.
//! 2. In this file: its `mod` line; an arm in [`Variant`] and in
//!    [`Variant::ALL`] (its length too), [`Variant::name`] and
//!    [`Variant::about`]; an arm in [`Protections::deduct`], and a field of
//!    [`Protections`] if it keeps state in the process. If it splits the
//!    stock, [`Variant::buckets`] (and the bucket count the k6 script's
//!    reset gives it); if the whole sale is one script that records its own
//!    request id, [`Variant::scripted`]; if its sales become orders,
//!    [`Variant::orders`].
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
mod etcd;
mod fenced;
mod local_mutex;
mod lua;
mod lua_batch;
mod lua_sharded;
mod lua_stream;
mod lua_then_queue;
mod none;
mod pg_advisory;
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

pub use self::about::{About, Reason};
pub use self::claims::{Behaviour, Claim, Claims};
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
    RedisThenPg,
}

impl Variant {
    /// All of them, in teaching order: from no protection to the right answer.
    pub const ALL: [Variant; 20] = [
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
        Variant::RedisThenPg,
    ];

    /// The name in URLs, JSON and on the dashboard.
    pub fn name(self) -> &'static str {
        match self {
            Variant::None => "none",
            Variant::LocalMutex => "local-mutex",
            Variant::Setnx => "setnx",
            Variant::SetnxExpiry => "setnx-expiry",
            Variant::Token => "token",
            Variant::Watchdog => "watchdog",
            Variant::Fenced => "fenced",
            Variant::Redlock => "redlock",
            Variant::Etcd => "etcd",
            Variant::ZooKeeper => "zookeeper",
            Variant::Lua => "lua",
            Variant::LuaBatch => "lua-batch",
            Variant::LuaSharded => "lua-sharded",
            Variant::LuaThenQueue => "lua-then-queue",
            Variant::LuaStream => "lua-stream",
            Variant::PgUpdate => "pg-update",
            Variant::PgForUpdate => "pg-for-update",
            Variant::PgOptimistic => "pg-optimistic",
            Variant::PgAdvisory => "pg-advisory",
            Variant::RedisThenPg => "redis-then-pg",
        }
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
            Variant::RedisThenPg => &redis_then_pg::ABOUT,
        }
    }

    /// The names of all variants, for error messages.
    pub fn names() -> Vec<String> {
        Self::ALL.iter().map(|v| v.name().to_owned()).collect()
    }

    /// Whether the whole sale is one script (`lua`, `lua-batch`,
    /// `lua-sharded` and the order variants): it checks and records its
    /// request id itself, with no claim before it.
    pub fn scripted(self) -> bool {
        matches!(
            self,
            Variant::Lua
                | Variant::LuaBatch
                | Variant::LuaSharded
                | Variant::LuaThenQueue
                | Variant::LuaStream
        )
    }

    /// Whether its stock and ledger live in PostgreSQL (`pg-*`, and
    /// `redis-then-pg`, whose Redis only filters the buyers): it checks
    /// and records its request ids there, and its books are read there
    /// ([`crate::pgstock::books`]).
    pub fn stock_in_postgres(self) -> bool {
        matches!(
            self,
            Variant::PgUpdate
                | Variant::PgForUpdate
                | Variant::PgOptimistic
                | Variant::PgAdvisory
                | Variant::RedisThenPg
        )
    }

    /// Whether its sales become orders (`lua-then-queue`, `lua-stream`):
    /// `stocklock reconcile` and the order panel concern these.
    pub fn orders(self) -> bool {
        matches!(self, Variant::LuaThenQueue | Variant::LuaStream)
    }

    /// Whether it takes a lock (so its requests wait for one, hold it, and
    /// show in the lock metrics).
    pub fn takes_lock(self) -> bool {
        match self {
            Variant::LocalMutex
            | Variant::Setnx
            | Variant::SetnxExpiry
            | Variant::Token
            | Variant::Watchdog
            | Variant::Fenced
            | Variant::Redlock
            | Variant::Etcd
            | Variant::ZooKeeper => true,
            Variant::None
            | Variant::Lua
            | Variant::LuaBatch
            | Variant::LuaSharded
            | Variant::LuaThenQueue
            | Variant::LuaStream
            | Variant::PgUpdate
            | Variant::PgForUpdate
            | Variant::PgOptimistic
            | Variant::PgAdvisory
            | Variant::RedisThenPg => false,
        }
    }

    /// How long a request waits for the lock: its `wait_ms`, or the
    /// variant's default (none: fail fast).
    pub fn wait(self, knobs: &Knobs) -> Duration {
        patience(knobs, self.about())
    }

    /// Why this instance cannot serve the variant: the lock store it needs
    /// was not given (`None`: it can).
    pub fn missing_store(self, stores: &crate::lock::LockStores) -> Option<&'static str> {
        match self {
            Variant::Redlock if stores.redlock.is_none() => Some(
                "redlock needs independent Redis servers: this instance was started without --redlock-nodes (stocklock up --redlock 5 starts five)",
            ),
            Variant::Etcd if stores.etcd.is_none() => Some(
                "etcd needs an etcd cluster: this instance was started without --etcd-endpoints (stocklock up --etcd 3 starts three members; install etcd-server, or run scripts/up.sh without --minimal)",
            ),
            Variant::ZooKeeper if stores.zookeeper.is_none() => Some(
                "zookeeper needs a ZooKeeper server: this instance was started without --zookeeper (stocklock up --zookeeper 1 starts one; install zookeeper, or run scripts/up.sh without --minimal)",
            ),
            _ => None,
        }
    }

    /// How many buckets a reset for this variant splits the stock into:
    /// [`crate::knobs::DEFAULT_BUCKETS`] for `lua-sharded`, 0 (one key) for the rest.
    pub fn buckets(self) -> u32 {
        match self {
            Variant::LuaSharded => crate::knobs::DEFAULT_BUCKETS,
            _ => 0,
        }
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
/// (`local-mutex`: a mutex per SKU; `lua-batch`: a queue per SKU;
/// `lua-sharded`: each SKU's bucket count as last seen; `lua-stream`: when
/// it last put each SKU in the workers' registry), and the dispatch of a
/// request to its variant.
#[derive(Default)]
pub struct Protections {
    local_mutex: local_mutex::LocalMutex,
    batch: lua_batch::LuaBatch,
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

    /// `lua-batch` sends up to `max` buyers of a SKU per call.
    pub fn with_batch_max(max: usize) -> Self {
        Self {
            batch: lua_batch::LuaBatch::new(max),
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
            Variant::RedisThenPg => self.redis_then_pg.deduct(ctx).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        for v in Variant::ALL {
            assert_eq!(v.name().parse::<Variant>(), Ok(v));
        }
        let mut names = Variant::names();
        names.dedup();
        assert_eq!(names.len(), Variant::ALL.len());
        assert!("Lua".parse::<Variant>().is_err());
    }

    #[test]
    fn every_variant_explains_itself() {
        for v in Variant::ALL {
            let info = v.info();
            assert!(info.explanation.len() > 200, "{v}: explanation too short");
            assert!(!info.code.is_empty(), "{v}: no code");
            assert!(!info.expected.two_instances.is_empty());
        }
    }
}
