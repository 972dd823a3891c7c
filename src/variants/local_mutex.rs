//! `local-mutex`: a per-process mutex per SKU, article 001's `synchronized`.
//!
//! Inside one process, requests for a SKU take turns and the sale is
//! correct. But the mutex lives in the process's memory: a second instance
//! behind nginx has its own mutex and runs the section at the same time. The
//! `race` scenario with two instances oversells; with one instance it does not.

use std::time::Duration;

use super::family::NO_SHARED_LOCK;
use super::{About, Claim, Claims, LockTimer, Protection, Variant, not_acquired};
use crate::lock::per_key::PerKey;
use crate::section::{Answer, Ctx, critical_section, unguarded};
use crate::store::StoreError;

pub(super) const ABOUT: About = About {
    name: "local-mutex",
    protection: "a tokio mutex per SKU inside each process (Java's synchronized)",
    explanation: "Each instance keeps a mutex per SKU in its own memory, and a request holds it around the whole critical section. \
        On one instance that is enough: requests take turns and nothing oversells. Behind nginx there are two processes, \
        each with its own mutex, so two requests (one per instance) run the section at the same time and sell the same unit. \
        The race scenario with two instances shows it; run it with --instances 1 and the oversell disappears.",
    protection_zh: "每个进程内按 SKU 的 `tokio` 互斥锁(相当于 Java 的 `synchronized`)",
    explanation_zh: "每个实例在自己的内存里为每个 SKU 保存一把互斥锁,请求在整个临界区内持有它。单实例时这已足够:请求排队执行,不会超卖。但 nginx 后面有两个进程,各有各的锁,两个实例上的请求会同时进入临界区,卖出同一件商品。两实例的 race 场景可以复现;用 `--instances 1` 运行,超卖就消失了。",
    code: r#"
let mutex = self.by_sku[sku]            // one per process!
let _held = mutex.lock().await;         // synchronized (this) { ... }
critical_section().await"#,
    default_lease: None,
    default_wait: Some(Duration::from_secs(10)),
    claims: Claims {
        one_instance: Claim::safe("one process, one mutex"),
        race: Claim::oversells("one mutex per process"),
        failover: Claim::not_applicable("the lock is in the process"),
        ..NO_SHARED_LOCK
    },
    undersells: None,
    facts: super::family::LOCK_FACTS,
};

/// The mutexes of this process, one per SKU in use: a SKU's mutex goes
/// when its last user does, so ever new SKUs do not grow the map.
#[derive(Default)]
pub(super) struct LocalMutex {
    by_sku: PerKey<tokio::sync::Mutex<()>>,
}

impl Protection for LocalMutex {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        let wait = ctx.wait(&ABOUT);
        let in_use = self.by_sku.use_key(&ctx.keys.stock);
        let mut timer = LockTimer::start(Variant::LocalMutex, ctx.keys);
        // A scheduled request notes that it waits (its hook only notes it).
        if ctx.hook.is_set() && in_use.try_lock().is_err() {
            ctx.hook.at(crate::lock::WAITS).await;
        }
        let held = tokio::time::timeout(wait, in_use.lock()).await;
        timer.waited(held.is_ok());
        let Ok(_held) = held else {
            return not_acquired(wait);
        };
        let answer = critical_section(ctx, unguarded()).await;
        timer.released();
        answer
    }
}
