//! `local-mutex`: a per-process mutex per SKU, article 001's `synchronized`.
//!
//! Inside one process, requests for a SKU take turns and the sale is
//! correct. But the mutex lives in the process's memory: a second instance
//! behind nginx has its own mutex and runs the section at the same time. The
//! `race` scenario with two instances oversells; with one instance it does not.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::{About, Claim, Claims, LockTimer, Protection, Variant, not_acquired};
use crate::section::{Answer, Ctx, critical_section, unguarded};
use crate::store::StoreError;

pub(super) const ABOUT: About = About {
    protection: "a tokio mutex per SKU inside each process (Java's synchronized)",
    explanation: "Each instance keeps a mutex per SKU in its own memory, and a request holds it around the whole critical section. \
        On one instance that is enough: requests take turns and nothing oversells. Behind nginx there are two processes, \
        each with its own mutex, so two requests (one per instance) run the section at the same time and sell the same unit. \
        The race scenario with two instances shows it; run it with --instances 1 and the oversell disappears.",
    protection_zh: "每个进程内按 SKU 的 tokio 互斥锁(相当于 Java 的 synchronized)",
    explanation_zh: "每个实例在自己的内存里为每个 SKU 保存一把互斥锁,请求在整个临界区内持有它。单实例时这已足够:请求排队执行,不会超卖。但 nginx 后面有两个进程,各有各的锁,两个实例上的请求会同时进入临界区,卖出同一件商品。两实例的 race 场景可以复现;用 --instances 1 运行,超卖就消失了。",
    code: r#"
let mutex = self.by_sku[sku]            // one per process!
let _held = mutex.lock().await;         // synchronized (this) { ... }
critical_section().await"#,
    default_lease: None,
    default_wait: Some(Duration::from_secs(10)),
    claims: Claims {
        race: Claim::oversells("one mutex per process"),
        slow_business: Claim::oversells(""),
        crash_after_acquire: Claim::NOT_APPLICABLE,
        pause_holder: Claim::NOT_APPLICABLE,
        kill_instance: Claim::NOT_APPLICABLE,
        lock_vanishes: Claim::NOT_APPLICABLE,
        retry_storm: Claim::safe("one sale per request_id"),
        clock_skew: Claim::NOT_APPLICABLE,
        redis_restart: Claim::NOT_APPLICABLE,
        redlock_minority_down: Claim::NOT_APPLICABLE,
        redlock_majority_down: Claim::NOT_APPLICABLE,
        redlock_restart_without_persistence: Claim::NOT_APPLICABLE,
    },
    undersells: None,
};

/// The mutexes of this process, one per SKU in use: a SKU's mutex goes
/// when its last user does, so ever new SKUs do not grow the map.
#[derive(Default)]
pub(super) struct LocalMutex {
    by_sku: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl LocalMutex {
    fn for_stock_key<'a>(&'a self, key: &'a str) -> InUse<'a> {
        let mut map = self.by_sku.lock().unwrap_or_else(PoisonError::into_inner);
        InUse {
            mutexes: self,
            key,
            mutex: map.entry(key.to_owned()).or_default().clone(),
        }
    }

    /// How many SKUs' mutexes exist right now.
    #[cfg(test)]
    fn in_use(&self) -> usize {
        self.by_sku
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// One request's use of a SKU's mutex; the last user removes it.
struct InUse<'a> {
    mutexes: &'a LocalMutex,
    key: &'a str,
    mutex: Arc<tokio::sync::Mutex<()>>,
}

impl Drop for InUse<'_> {
    fn drop(&mut self) {
        let mut map = self
            .mutexes
            .by_sku
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // The map's and ours: nobody else uses it (new users clone under
        // this same lock).
        if Arc::strong_count(&self.mutex) == 2 {
            map.remove(self.key);
        }
    }
}

impl Protection for LocalMutex {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        let wait = ctx.wait(&ABOUT);
        let in_use = self.for_stock_key(&ctx.keys.stock);
        let mut timer = LockTimer::start(Variant::LocalMutex, ctx.keys);
        let held = tokio::time::timeout(wait, in_use.mutex.lock()).await;
        timer.waited(held.is_ok());
        let Ok(_held) = held else {
            return not_acquired(wait);
        };
        let answer = critical_section(ctx, unguarded()).await;
        timer.released();
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_skus_mutex_goes_with_its_last_user() {
        let mutexes = LocalMutex::default();
        {
            let first = mutexes.for_stock_key("stock:{a}");
            let second = mutexes.for_stock_key("stock:{a}");
            assert!(
                Arc::ptr_eq(&first.mutex, &second.mutex),
                "one mutex per SKU"
            );
            let _held = first.mutex.lock().await;
            drop(second);
            assert_eq!(mutexes.in_use(), 1, "still in use by the first");
        }
        assert_eq!(mutexes.in_use(), 0);
        for sku in 0..1000 {
            let key = format!("stock:{{{sku}}}");
            let _in_use = mutexes.for_stock_key(&key);
        }
        assert_eq!(mutexes.in_use(), 0, "ever new SKUs leave nothing behind");
    }
}
