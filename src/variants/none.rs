//! `none`: the critical section with nothing around it.
//!
//! Every request reads the stock, works, and writes back what it read minus
//! one. Two requests that read the same value both sell, and both write the
//! same remainder: one unit of stock pays for two sales. The baseline every
//! other variant is measured against; the `race` scenario (any concurrency at
//! all, `work_ms` > 0 to widen the gap) shows it oversell every time.

use super::family::NO_SHARED_LOCK;
use super::{About, Protection};
use crate::section::{Answer, Ctx, critical_section, unguarded};
use crate::store::StoreError;

pub(super) const ABOUT: About = About {
    name: "none",
    protection: "nothing",
    explanation: "The bare critical section: read the stock, do the business work, write back what was read minus one. \
        Two requests that read the same value both sell and both write the same remainder, so one unit pays for two sales. \
        Nothing protects it, on one instance or many: any concurrency oversells, and a longer work_ms only widens the gap. \
        This is the baseline the other variants are measured against; the race scenario shows it.",
    protection_zh: "无任何保护",
    explanation_zh: "最原始的临界区:读库存、执行业务、把读到的值减一写回。两个请求若读到同一个值,就会都卖出、都写回同一个余量,一件库存被卖了两次。无论单实例还是多实例,只要有并发就会超卖,work_ms 越长,窗口越大。它是衡量其他方案的基线,race 场景即可复现。",
    code: r#"
let stock = GET stock:{sku}
if stock > 0 {
    sleep(work_ms)            // the gap: others read the same stock here
    SET stock:{sku} stock - 1   // and record the sale, in one script
}"#,
    default_lease: None,
    default_wait: None,
    claims: NO_SHARED_LOCK,
    undersells: None,
    facts: super::Facts {
        takes_lock: false,
        ..super::family::LOCK_FACTS
    },
};

pub(super) struct NoLock;

impl Protection for NoLock {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        critical_section(ctx, unguarded()).await
    }
}
