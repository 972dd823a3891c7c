//! What a variant is: the teaching text its card, `/api/variants` and
//! the lab's matrix say of it, and the facts the rest of the code reads
//! (whether it is one script, where its stock lives, who checks its ids,
//! where its answers are counted, what it needs).

use std::time::Duration;

use super::{Claims, Variant};
use crate::wire::{VariantInfo, Verdicts};

/// The teaching text of a variant, and the facts of what it is. Each
/// variant's file opens with the same words in its module comment, and
/// states every fact in its `ABOUT`: nothing else decides them by
/// variant.
pub struct About {
    /// The name in URLs, JSON and on the dashboard.
    pub name: &'static str,
    /// One line: what protects the critical section.
    pub protection: &'static str,
    /// What it does, what breaks it, which scenario shows it.
    pub explanation: &'static str,
    /// The same two in Chinese, for the dashboard's 中文 view.
    pub protection_zh: &'static str,
    pub explanation_zh: &'static str,
    /// The lines of code that matter.
    pub code: &'static str,
    pub default_lease: Option<Duration>,
    pub default_wait: Option<Duration>,
    /// What it does in each scenario of the lab: its row of the matrix.
    /// A safe race claim has no note: `stocklock load` compares it with "safe".
    pub claims: Claims,
    /// Why it is expected to under-sell a race (turn buyers away while
    /// stock is left), if it is.
    pub undersells: Option<Reason>,
    /// What it is, as the rest of the code asks: built per family in
    /// `family.rs`, a variant stating only where it differs.
    pub facts: Facts,
}

/// What a variant is, read where needed instead of matched on by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Facts {
    /// Whether the whole sale is one script (`lua`, `lua-batch`,
    /// `lua-sharded` and the order variants): it checks and records its
    /// request id itself, with no claim before it.
    pub scripted: bool,
    /// Whether its stock and ledger live in PostgreSQL (`pg-*`, and
    /// `redis-then-pg`, whose Redis only filters the buyers): it checks
    /// and records its request ids there, and its books are read there
    /// ([`crate::pgstock::books`]).
    pub stock_in_postgres: bool,
    /// Whether its sales become orders (`lua-then-queue`, `lua-stream`):
    /// `stocklock reconcile` and the order panel concern these.
    pub orders: bool,
    /// Whether it takes a lock (so its requests wait for one, hold it, and
    /// show in the lock metrics).
    pub takes_lock: bool,
    /// How many buckets a reset for it splits the stock into:
    /// [`crate::knobs::DEFAULT_BUCKETS`] for `lua-sharded`, 0 (one key)
    /// for the rest.
    pub buckets: u32,
    /// The lock store beside the main Redis it needs, which an instance
    /// may not have been given.
    pub needs: Option<Needs>,
}

impl Facts {
    /// Whether it checks the SKU and the request id itself (inside its one
    /// script, or in PostgreSQL): the seller then claims no id before it,
    /// and asks Redis nothing of the SKU first.
    pub const fn own_ids(&self) -> bool {
        self.scripted || self.stock_in_postgres
    }

    /// Where its answers are counted in the ledger's share of an instance.
    pub const fn counted(&self) -> Counted {
        if self.stock_in_postgres {
            Counted::ByInstance
        } else if self.scripted {
            Counted::ScriptWithIds
        } else {
            Counted::InRedis
        }
    }
}

/// Where a variant's answers are counted (served, replays, busy): in
/// Redis as they are given, or by the instance, which adds them to the
/// ledger's share of it every second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// In Redis: by the section's write, and the record of every other
    /// answer (the lock variants).
    InRedis,
    /// In Redis by its script for the requests with an id; the instance
    /// counts the sold, sold-out and unknown answers of the others, one
    /// Redis call fewer per sale (the scripts).
    ScriptWithIds,
    /// By the instance, every one: nothing is counted in Redis (the
    /// database's variants).
    ByInstance,
}

/// A lock store beside the main Redis, which an instance is given only
/// when asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    Redlock,
    Etcd,
    ZooKeeper,
}

impl Needs {
    /// Whether `stores` has it.
    pub fn given(self, stores: &crate::lock::LockStores) -> bool {
        match self {
            Needs::Redlock => stores.redlock.is_some(),
            Needs::Etcd => stores.etcd.is_some(),
            Needs::ZooKeeper => stores.zookeeper.is_some(),
        }
    }

    /// Why an instance without it cannot serve the variant, and how to get it.
    pub fn missing(self) -> &'static str {
        match self {
            Needs::Redlock => {
                "redlock needs independent Redis servers: this instance was started without --redlock-nodes (stocklock up --redlock 5 starts five)"
            }
            Needs::Etcd => {
                "etcd needs an etcd cluster: this instance was started without --etcd-endpoints (stocklock up --etcd 3 starts three members; install etcd-server, or run scripts/up.sh without --minimal)"
            }
            Needs::ZooKeeper => {
                "zookeeper needs a ZooKeeper server: this instance was started without --zookeeper (stocklock up --zookeeper 1 starts one; install zookeeper, or run scripts/up.sh without --minimal)"
            }
        }
    }
}

/// A reason, in English and in Chinese (the dashboard's 中文 view).
pub struct Reason {
    pub en: &'static str,
    pub zh: &'static str,
}

impl Variant {
    /// What `/api/variants` says of it.
    pub fn info(self) -> VariantInfo {
        let about = self.about();
        let claims = &about.claims;
        VariantInfo {
            name: self.name().to_owned(),
            protection: about.protection.to_owned(),
            explanation: about.explanation.to_owned(),
            protection_zh: about.protection_zh.to_owned(),
            explanation_zh: about.explanation_zh.to_owned(),
            code: about.code.trim().to_owned(),
            default_lease_ms: about.default_lease.map(|d| d.as_millis() as u64),
            default_wait_ms: about.default_wait.map(|d| d.as_millis() as u64),
            // The teaching matrix's five columns, read from the lab's scenarios.
            expected: Verdicts {
                two_instances: claims.race.text(),
                work_exceeds_lease: claims.slow_business.text(),
                crash_after_acquire: claims.crash_after_acquire.text(),
                pause_exceeds_lease: claims.pause_holder.text(),
                redis_minority_down: claims.redlock_minority_down.text(),
            },
            undersells: about.undersells.as_ref().map(|r| r.en.to_owned()),
            undersells_zh: about.undersells.as_ref().map(|r| r.zh.to_owned()),
            orders: self.orders(),
        }
    }
}
