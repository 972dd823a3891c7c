//! `lua-sharded`: the `lua` script on a hot SKU split into K buckets.
//!
//! One SKU lives in one slot, so one Redis core serves all of its sales,
//! however many masters a cluster has. Split its stock into K buckets, each
//! with a hash tag of its own (`stock:{sku#0}` ... `stock:{sku#K-1}`), and the
//! sales spread over K slots and so over the masters. A sale runs the same
//! atomic script as `lua` on one bucket, chosen per request (from the
//! `request_id` when there is one, so that a retry finds its first answer),
//! and moves on to the next bucket when that one is empty. Every bucket is
//! atomic on its own and sells only what it holds, so the SKU never
//! oversells and sells exactly its stock in total; the price is that "sold
//! out" is only known after asking every bucket, and that the last units
//! are found by walking the buckets.

use std::collections::HashMap;
use std::sync::Mutex;

use super::family::SCRIPT;
use super::lua::{Deducted, Orders, run_deduct, unsent_or_unknown};
use super::{About, Claim, Claims, Protection};
use crate::section::{Answer, BusyReason, Ctx, Outcome};
use crate::store::StoreError;

pub(super) const ABOUT: About = About {
    name: "lua-sharded",
    protection: "the lua script on one of K buckets of the stock (each in its own slot), falling back to the others when empty",
    explanation: "For a SKU too hot for one Redis core. One SKU's keys share a hash tag, so one slot, one master and one core \
        serve all its sales, however big the cluster. Here its stock is split into K buckets (8 by default; reset with \
        buckets=K), each with a hash tag of its own, so the buckets spread over the slots and a cluster's masters. A sale \
        runs the lua variant's atomic script on one bucket, chosen per request (from request_id when there is one, so a retry \
        finds its first answer), and falls back to the next bucket when that one is empty. Each bucket is atomic and sells only \
        what it holds, so the SKU never oversells and sells exactly its initial stock in total. The price: sold out is only \
        known after asking every bucket, and the last units are found by walking the buckets. Once every bucket said sold \
        out, an instance answers the next buyers itself from a sold-out mark, as lua does.",
    protection_zh: "在 K 个库存分桶之一上执行 lua 脚本(每桶一个 `slot`),桶空时转向其他桶",
    explanation_zh: "用于单个 Redis 核心扛不住的热点 SKU。一个 SKU 的键共享一个 `hash tag`,所以无论集群多大,它的所有销售都落在一个 `slot`、一个主节点、一个核心上。这里把它的库存拆成 K 个桶(默认 8 个;重置时用 `buckets=K`),每个桶有自己的 `hash tag`,分布到不同的 `slot` 和集群主节点上。一次销售在一个桶上执行与 lua 变体相同的原子脚本,桶按请求选择(有 request_id 时由它决定,重试会找到第一次的答案),桶空时转向下一个桶。每个桶自身是原子的,只卖自己持有的库存,所以这个 SKU 不会超卖,总共恰好卖出初始库存。代价是:要问遍所有桶才能确定售罄,最后几件要逐桶寻找。所有桶都说售罄之后,实例像 lua 一样凭售罄标记自己回答后面的买家。",
    code: r#"
let k = cached count (the script refuses a stale one)
let first = hash(request_id) % k  (or random)
for b in (first..k).chain(0..first) {
    match EVAL deduct.lua stock:{sku#b} ledger:{sku#b} ... {
        sold(unit) => return sold(unit * k + b),    // units unique across buckets
        sold_out   => continue,                     // try the next bucket
    }
}
sold_out"#,
    default_lease: None,
    default_wait: None,
    claims: Claims {
        pause_holder: Claim::NOT_APPLICABLE,
        redis_restart: Claim::NOT_APPLICABLE,
        ..SCRIPT
    },
    undersells: None,
    facts: super::Facts {
        buckets: crate::knobs::DEFAULT_BUCKETS,
        ..super::family::SCRIPT_FACTS
    },
};

/// The variant's process-wide state: each SKU's bucket count as last seen.
/// Never trusted blindly: every script checks it against the count the SKU's
/// keys carry, and answers "out of date" (having read and recorded nothing)
/// when a reset changed it; the walk then starts again with the right count.
#[derive(Default)]
pub(super) struct ShardedScript {
    buckets: Mutex<HashMap<String, u32>>,
}

impl ShardedScript {
    fn known(&self, tag: &str) -> Option<u32> {
        self.buckets.lock().ok()?.get(tag).copied()
    }

    fn learn(&self, tag: &str, buckets: u32) {
        if let Ok(mut cache) = self.buckets.lock() {
            cache.insert(tag.to_owned(), buckets);
        }
    }
}

/// The first bucket a request tries: fixed by its request_id, so a retry
/// walks the buckets in the same order as the first attempt.
fn first_bucket(request_id: Option<&str>, buckets: u32) -> u32 {
    let n = match request_id {
        // FNV-1a: stable across processes and restarts.
        Some(id) => id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        }),
        None => uuid::Uuid::new_v4().as_u64_pair().0,
    };
    (n % u64::from(buckets.max(1))) as u32
}

impl Protection for ShardedScript {
    async fn deduct(&self, ctx: &mut Ctx<'_>) -> Result<Answer, StoreError> {
        let tag = ctx.keys.tag.clone();
        let mut k = self.known(&tag).unwrap_or(0);
        // A reset may change the count at any time; two corrections are
        // plenty (a third means resets are racing this very request).
        for _ in 0..3 {
            match walk(ctx, k).await {
                Ok(Walk::Done(answer)) => return Ok(answer),
                Ok(Walk::Stale(actual)) => {
                    self.learn(&tag, actual);
                    k = actual;
                }
                Err(err) => return unsent_or_unknown(err),
            }
        }
        Ok(Answer::unrecorded(Outcome::Busy(BusyReason::Reset)))
    }
}

/// How one walk over the buckets ended.
enum Walk {
    Done(Answer),
    /// The SKU has this many buckets, not the number walked.
    Stale(u32),
}

/// Tries the buckets of a SKU believed to have `k` (0: not split, the
/// SKU's own key, walked as one bucket), from the request's first
/// bucket on; only the last one tried records a sold-out answer.
async fn walk(ctx: &mut Ctx<'_>, k: u32) -> Result<Walk, StoreError> {
    let n = k.max(1);
    let first = first_bucket(ctx.request_id, n);
    for step in 0..n {
        let b = (first + step) % n;
        let keys = if k == 0 {
            ctx.keys.clone()
        } else {
            ctx.keys.bucket(b)
        };
        let mut answer = match run_deduct(ctx, &keys, step + 1 == n, Some(k), Orders::None).await? {
            Deducted::StaleBuckets(actual) => return Ok(Walk::Stale(actual)),
            Deducted::Answer(answer) | Deducted::Order(answer, _) => answer,
        };
        match answer.outcome {
            Outcome::Sold { unit, remaining } => {
                // Unit u of bucket b is unit (u-1)*n + b + 1 of the SKU (u itself unsplit).
                let unit = (unit - 1) * i64::from(n) + i64::from(b) + 1;
                answer.outcome = Outcome::Sold { unit, remaining };
                return Ok(Walk::Done(answer));
            }
            // A sold-out bucket is the answer only when it was the last one
            // tried, or a retry's recorded answer.
            Outcome::SoldOut { .. } if step + 1 < n && !answer.replayed => {}
            _ => return Ok(Walk::Done(answer)),
        }
    }
    // Not reached: n >= 1, and the last bucket always answers above.
    Ok(Walk::Done(Answer::recorded(
        Outcome::SoldOut { remaining: 0 },
        false,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_starts_at_the_same_bucket_and_units_stay_unique() {
        assert_eq!(first_bucket(Some("r-1"), 8), first_bucket(Some("r-1"), 8));
        let spread: std::collections::BTreeSet<u32> = (0..200)
            .map(|i| first_bucket(Some(&format!("r-{i}")), 8))
            .collect();
        assert_eq!(spread.len(), 8, "request ids spread over every bucket");
        let k = 3i64;
        let mut units = std::collections::BTreeSet::new();
        for b in 0..k {
            for u in 1..=10 {
                assert!(units.insert((u - 1) * k + b + 1));
            }
        }
        assert_eq!(units.len(), 30);
    }
}
