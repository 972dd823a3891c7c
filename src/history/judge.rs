//! One SKU's verdict, and the smallest set of its operations that shows it.
//!
//! - `linearizable`: an order of every answer exists in the spec;
//! - `not_linearizable`: one exists only if some "sold out" answers are read
//!   as saying nothing about the stock (their ids still took nothing): a
//!   buyer was told "sold out" while stock remained;
//! - `unsafe`: none exists even so (a unit sold twice, more sold than
//!   stocked, books that disagree with the answers, an id answered twice
//!   differently);
//! - `undecided`: the time ran out first. That is a failure, never a pass.
//!
//! The smallest set: every other step is weakened (it may have happened at
//! any time after its call, or not at all; a reading says nothing) and the
//! history still has no order, so these operations alone contradict the
//! spec. Found by cutting the history at the earliest moment it has no
//! order, then weakening halves, quarters, ... of what is left while it
//! still has none.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::wire::Said;

use super::op::{Outcome, SkuHistory};
use super::search::{Found, search};
use super::spec::Effect;
use super::steps::{Reading, Step, before, steps, weakened};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Linearizable,
    NotLinearizable,
    Undecided,
    Unsafe,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Linearizable => "linearizable",
            Verdict::NotLinearizable => "not_linearizable",
            Verdict::Undecided => "undecided",
            Verdict::Unsafe => "unsafe",
        }
    }

    /// The verdict in Chinese, for the pages.
    pub fn as_zh(self) -> &'static str {
        match self {
            Verdict::Linearizable => "可线性化",
            Verdict::NotLinearizable => "不可线性化",
            Verdict::Undecided => "未能判定",
            Verdict::Unsafe => "不安全",
        }
    }
}

/// What the checker decided of one SKU.
#[derive(Clone, Debug, Serialize)]
pub struct Decision {
    pub sku: String,
    pub ops: usize,
    pub verdict: Verdict,
    pub why: String,
    /// The same, in Chinese.
    pub why_zh: String,
    /// The smallest set of operations that cannot be ordered (indices into
    /// the SKU's operations), empty when linearizable.
    #[serde(skip)]
    pub culprits: Vec<usize>,
    /// Their lines in the file.
    pub lines: Vec<usize>,
    /// The moment by which they have no order (ns).
    pub impossible_at: Option<u64>,
    /// False when the minimising ran out of time (the set is one, not the
    /// smallest).
    pub smallest: bool,
    pub elapsed_ms: u64,
}

/// Decides one SKU within `budget` (half of it for the verdict, what is
/// left for the smallest set).
pub fn decide(history: &SkuHistory, budget: Duration) -> Decision {
    let started = Instant::now();
    let deadline = started + budget;
    let mut decision = Decision {
        sku: history.sku.clone(),
        ops: history.ops.len(),
        verdict: Verdict::Linearizable,
        why: String::new(),
        why_zh: String::new(),
        culprits: Vec::new(),
        lines: Vec::new(),
        impossible_at: None,
        smallest: true,
        elapsed_ms: 0,
    };
    let done = |mut d: Decision, verdict: Verdict, why: Said, culprits: Vec<usize>| {
        d.verdict = verdict;
        (d.why, d.why_zh) = (why.en, why.zh);
        d.lines = culprits.iter().map(|&i| history.lines[i]).collect();
        d.impossible_at = culprits.iter().filter_map(|&i| history.ops[i].ret).max();
        d.culprits = culprits;
        d.elapsed_ms = started.elapsed().as_millis() as u64;
        d
    };
    let strict = match steps(history, Reading::Strict) {
        Ok(steps) => steps,
        Err(two) => {
            let id = &two.id;
            let (a, b) = (describe(history, two.ops[0]), describe(history, two.ops[1]));
            let why = crate::said!(
                "request id {id:?} was answered {} and then {}",
                "请求 id {id:?} 先得到 {},后又得到 {}";
                a.en, b.en
            );
            let why = Said {
                zh: format!("请求 id {id:?} 先得到 {},后又得到 {}", a.zh, b.zh),
                ..why
            };
            return done(decision, Verdict::Unsafe, why, two.ops.to_vec());
        }
    };
    if let Some((why, culprits)) = plainly_unsafe(history, &strict) {
        return done(decision, Verdict::Unsafe, why, culprits);
    }
    let half = started + budget / 2;
    match search(history.initial, &strict, half) {
        Found::Ordered => {
            let steps = strict.len();
            let why = crate::said!(
                "every answer has its place in one order (steps: {steps})",
                "每个回答都能排进同一个顺序(步数:{steps})"
            );
            return done(decision, Verdict::Linearizable, why, Vec::new());
        }
        Found::OutOfTime => return undecided(decision, budget, started),
        Found::NoOrder => {}
    }
    let lenient = steps(history, Reading::SoldOutSaysNothing).unwrap_or_default();
    let (verdict, shown) = match search(history.initial, &lenient, half) {
        Found::Ordered => (Verdict::NotLinearizable, &strict),
        Found::NoOrder => (Verdict::Unsafe, &lenient),
        Found::OutOfTime => return undecided(decision, budget, started),
    };
    let (culprits, smallest) = smallest_set(history.initial, shown, deadline);
    decision.smallest = smallest;
    let described: Vec<Said> = culprits.iter().map(|&i| describe(history, i)).collect();
    let set = Said::join(&described, &crate::said!("; ", ";"));
    let (en, zh) = (&set.en, &set.zh);
    let why = match verdict {
        Verdict::NotLinearizable => crate::said!(
            "a buyer was told sold_out while stock remained: these cannot be ordered \
             unless a sold_out says nothing: {en}",
            "还有库存时却有买家被告知 sold_out:除非 sold_out 什么也不说明,否则这些操作排不出顺序:{zh}"
        ),
        _ => crate::said!(
            "no order of these exists, whatever sold_out means: {en}",
            "无论 sold_out 表示什么,这些操作都排不出顺序:{zh}"
        ),
    };
    done(decision, verdict, why, culprits)
}

fn undecided(mut decision: Decision, budget: Duration, started: Instant) -> Decision {
    decision.verdict = Verdict::Undecided;
    let seconds = budget.as_secs_f64();
    let why = crate::said!(
        "no order was found and not every way was tried within {seconds} s: nothing is known \
         (give it more time with --timeout-s)",
        "{seconds} 秒内没有找到顺序,也没有试完所有排法:什么也不能断定(用 --timeout-s 给它更多时间)"
    );
    (decision.why, decision.why_zh) = (why.en, why.zh);
    decision.elapsed_ms = started.elapsed().as_millis() as u64;
    decision
}

/// What needs no search: a unit sold more often than it came back, a unit
/// never stocked, more sales than units.
fn plainly_unsafe(history: &SkuHistory, steps: &[Step]) -> Option<(Said, Vec<usize>)> {
    let initial = history.initial;
    let first_op = |s: &Step| {
        s.ops
            .iter()
            .copied()
            .find(|&i| history.ops[i].outcome == Outcome::Sold)
            .unwrap_or(s.ops[0])
    };
    let sales: Vec<&Step> = steps
        .iter()
        .filter(|s| s.must() && matches!(s.effect, Effect::Take(_)))
        .collect();
    let gives = |u: u32| steps.iter().filter(|s| s.effect == Effect::Give(u)).count();
    for sale in &sales {
        if let Effect::Take(u) = sale.effect
            && !(1..=initial).contains(&u)
        {
            let why = crate::said!(
                "unit {u} was sold, but the stock was units 1..={initial}",
                "卖出了第 {u} 件,但库存只有第 1..={initial} 件"
            );
            return Some((why, vec![first_op(sale)]));
        }
    }
    let mut by_unit: std::collections::BTreeMap<u32, Vec<&Step>> = Default::default();
    for sale in &sales {
        if let Effect::Take(u) = sale.effect {
            by_unit.entry(u).or_default().push(sale);
        }
    }
    for (u, sold) in &by_unit {
        if sold.len() > 1 + gives(*u) {
            let times = sold.len();
            let why = crate::said!(
                "unit {u} was sold {times} times",
                "第 {u} 件被卖出了 {times} 次"
            );
            return Some((why, sold.iter().take(2).map(|s| first_op(s)).collect()));
        }
    }
    let given: usize = steps
        .iter()
        .filter(|s| matches!(s.effect, Effect::Give(_)))
        .count();
    if sales.len() > initial as usize + given {
        let sold = sales.len();
        let why = crate::said!(
            "{sold} units were sold of {initial} stocked ({given} given back)",
            "库存 {initial} 件却卖出了 {sold} 件(退回 {given} 件)"
        );
        return Some((why, sales.iter().map(|s| first_op(s)).collect()));
    }
    None
}

/// The operations of the smallest set of `steps` that has no order by
/// itself (the rest weakened), and whether it is the smallest (the time
/// did not run out).
fn smallest_set(initial: u32, steps: &[Step], deadline: Instant) -> (Vec<usize>, bool) {
    let fails = |candidate: &[Step]| search(initial, candidate, deadline) == Found::NoOrder;
    // The earliest moment by which the history has no order.
    let mut cuts: Vec<u64> = steps.iter().filter_map(|s| s.ret).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let (mut lo, mut hi) = (0, cuts.len().saturating_sub(1));
    while lo < hi {
        let mid = (lo + hi) / 2;
        if fails(&before(steps, cuts[mid]).0) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let (cut, from) = match cuts.get(lo) {
        Some(&cut) => before(steps, cut),
        None => (steps.to_vec(), (0..steps.len()).collect()),
    };
    // Weaken halves, quarters, ... of the steps that must happen.
    let mut kept: Vec<bool> = cut.iter().map(Step::must).collect();
    let mut smallest = true;
    let mut chunk = kept.iter().filter(|&&k| k).count().div_ceil(2).max(1);
    loop {
        let live: Vec<usize> = (0..kept.len()).filter(|&i| kept[i]).collect();
        for block in live.chunks(chunk) {
            if Instant::now() > deadline {
                smallest = false;
                break;
            }
            let mut trial = kept.clone();
            for &i in block {
                trial[i] = false;
            }
            if fails(&weakened(&cut, &trial)) {
                kept = trial;
            }
        }
        if chunk == 1 || !smallest {
            break;
        }
        chunk = chunk.div_ceil(2);
    }
    let mut ops: Vec<usize> = (0..cut.len())
        .filter(|&i| kept[i])
        .flat_map(|i| steps[from[i]].ops.iter().copied())
        .collect();
    ops.sort_unstable();
    (ops, smallest)
}

/// One operation, for a sentence: `line 7: client 3 (id r1) sold unit 2 [100, 250]`.
pub(super) fn describe(history: &SkuHistory, i: usize) -> Said {
    let op = &history.ops[i];
    let (unit, left) = (
        op.unit.unwrap_or_default(),
        op.remaining.unwrap_or_default(),
    );
    let what = match op.outcome {
        Outcome::Sold => crate::said!("sold unit {unit}", "卖出第 {unit} 件"),
        Outcome::Returned => crate::said!("returned unit {unit}", "退回第 {unit} 件"),
        Outcome::Read => crate::said!("read {left} left", "读到剩 {left} 件"),
        Outcome::SoldOut => crate::said!("sold_out", "被告知售罄"),
        Outcome::Busy => crate::said!("busy", "被拒绝"),
        Outcome::Unknown => crate::said!("unknown", "结果未知"),
    };
    let id = op
        .id
        .as_deref()
        .map(|id| format!(" (id {id})"))
        .unwrap_or_default();
    let (line, client, call) = (history.lines[i], op.client, op.call);
    let ret = op.ret.map_or(crate::said!("no answer", "无应答"), |r| {
        Said::same(r.to_string())
    });
    let (what_en, what_zh, ret_en, ret_zh) = (&what.en, &what.zh, &ret.en, &ret.zh);
    crate::said!(
        "line {line}: client {client}{id} {what_en} [{call}, {ret_en}]",
        "第 {line} 行:客户端 {client}{id} {what_zh} [{call}, {ret_zh}]"
    )
}
