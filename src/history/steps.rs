//! From operations to the steps the search orders: one step per purchase
//! (every attempt of one request id together), per reading, per give-back;
//! a refusal is no step at all.
//!
//! A request id's attempts take effect at most once together, so they are
//! one step: it may happen from the first call of an attempt that could
//! have done it (not a `busy` one) until the first definitive answer (a
//! sale, or a "sold out"), which reports it. Two different definitive
//! answers of one id break the rule outright.

use std::collections::BTreeMap;

use super::op::{Op, Outcome, SkuHistory};
use super::spec::Effect;

/// One thing that happened to the stock, at one moment of its window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Step {
    pub(super) effect: Effect,
    pub(super) call: u64,
    /// The end of its window; `None`: any time after `call`, or never.
    pub(super) ret: Option<u64>,
    /// The operations (indices into the SKU's) it stands for.
    pub(super) ops: Vec<usize>,
}

impl Step {
    /// It has to be in the order (it was answered).
    pub(super) fn must(&self) -> bool {
        self.ret.is_some()
    }
}

/// How "sold out" answers are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reading {
    /// As the spec says: the stock was empty.
    Strict,
    /// As saying nothing about the stock: its id still took nothing.
    SoldOutSaysNothing,
}

/// One request id answered two different things.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct TwoAnswers {
    pub(super) id: String,
    pub(super) ops: [usize; 2],
}

/// The steps of `history`, or the first id with two answers.
pub(super) fn steps(history: &SkuHistory, reading: Reading) -> Result<Vec<Step>, TwoAnswers> {
    let mut steps = Vec::new();
    // Purchases: by id, in the order of their first attempt; an attempt
    // without an id is a purchase of its own.
    let mut purchases: Vec<Vec<usize>> = Vec::new();
    let mut by_id: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, op) in history.ops.iter().enumerate() {
        match op.outcome {
            Outcome::Read => steps.push(Step {
                effect: Effect::Count(op.remaining.unwrap_or_default()),
                call: op.call,
                ret: op.ret,
                ops: vec![i],
            }),
            Outcome::Returned => steps.push(Step {
                effect: Effect::Give(op.unit.unwrap_or_default()),
                call: op.call,
                ret: op.ret,
                ops: vec![i],
            }),
            Outcome::Sold | Outcome::SoldOut | Outcome::Unknown | Outcome::Busy => {
                match op.id.as_deref() {
                    Some(id) => {
                        let at = *by_id.entry(id).or_insert_with(|| {
                            purchases.push(Vec::new());
                            purchases.len() - 1
                        });
                        purchases[at].push(i);
                    }
                    None => purchases.push(vec![i]),
                }
            }
        }
    }
    for attempts in purchases {
        if let Some(step) = purchase(&history.ops, &attempts, reading)? {
            steps.push(step);
        }
    }
    Ok(steps)
}

/// The one step of a purchase's attempts, if it is one.
fn purchase(ops: &[Op], attempts: &[usize], reading: Reading) -> Result<Option<Step>, TwoAnswers> {
    let answers: Vec<usize> = attempts
        .iter()
        .copied()
        .filter(|&i| matches!(ops[i].outcome, Outcome::Sold | Outcome::SoldOut))
        .collect();
    if let Some(&first) = answers.first()
        && let Some(&other) = answers
            .iter()
            .find(|&&i| !same_answer(&ops[i], &ops[first]))
    {
        return Err(TwoAnswers {
            id: ops[first].id.clone().unwrap_or_default(),
            ops: [first, other],
        });
    }
    let could: Vec<usize> = attempts
        .iter()
        .copied()
        .filter(|&i| ops[i].outcome != Outcome::Busy)
        .collect();
    let Some(call) = could.iter().map(|&i| ops[i].call).min() else {
        return Ok(None); // refused every time: nothing happened
    };
    let ret = answers.iter().filter_map(|&i| ops[i].ret).min();
    let effect = match answers.first().map(|&i| &ops[i]) {
        None => Effect::TakeAny,
        Some(op) if op.outcome == Outcome::Sold => Effect::Take(op.unit.unwrap_or_default()),
        Some(_) => match reading {
            Reading::Strict => Effect::Empty,
            Reading::SoldOutSaysNothing => return Ok(None),
        },
    };
    Ok(Some(Step {
        effect,
        call,
        ret,
        ops: could,
    }))
}

fn same_answer(a: &Op, b: &Op) -> bool {
    a.outcome == b.outcome && (a.outcome != Outcome::Sold || a.unit == b.unit)
}

/// `steps` with those not `kept` weakened: a reading or a "sold out" says
/// nothing, anything else may happen at any time after its call, or never,
/// and a sale may have taken any unit. Whatever order the whole history has,
/// the weakened one has too, so a weakened history with no order shows that
/// the whole has none.
pub(super) fn weakened(steps: &[Step], kept: &[bool]) -> Vec<Step> {
    steps
        .iter()
        .zip(kept)
        .filter_map(|(step, &keep)| match (keep, step.effect.observes()) {
            (true, _) => Some(step.clone()),
            (false, true) => None,
            (false, false) => Some(loosened(step)),
        })
        .collect()
}

/// `step`, at any time after its call or never, a sale of any unit.
fn loosened(step: &Step) -> Step {
    let effect = match step.effect {
        Effect::Take(_) => Effect::TakeAny,
        other => other,
    };
    Step {
        effect,
        ret: None,
        ..step.clone()
    }
}

/// The steps as known at `cut`: those called after it never happened, and
/// those not answered by it may still happen, or not (loosened as by
/// [`weakened`]).
pub(super) fn before(steps: &[Step], cut: u64) -> (Vec<Step>, Vec<usize>) {
    let mut kept = Vec::new();
    let mut from = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        if step.call > cut {
            continue;
        }
        match step.ret {
            Some(ret) if ret <= cut => kept.push(step.clone()),
            _ if step.effect.observes() => continue,
            _ => kept.push(loosened(step)),
        }
        from.push(i);
    }
    (kept, from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(
        id: Option<&str>,
        call: u64,
        ret: Option<u64>,
        outcome: Outcome,
        unit: Option<u32>,
    ) -> Op {
        Op {
            sku: "a".into(),
            client: 0,
            id: id.map(str::to_owned),
            call,
            ret,
            outcome,
            unit,
            remaining: None,
            note: None,
        }
    }

    fn history(ops: Vec<Op>) -> SkuHistory {
        SkuHistory {
            sku: "a".into(),
            initial: 3,
            lines: (1..=ops.len()).collect(),
            ops,
        }
    }

    #[test]
    fn an_ids_attempts_are_one_step_from_its_first_possible_call_to_its_first_answer() {
        let h = history(vec![
            op(Some("r"), 1, Some(2), Outcome::Busy, None),
            op(Some("r"), 5, None, Outcome::Unknown, None),
            op(Some("r"), 9, Some(12), Outcome::Sold, Some(3)),
            op(Some("r"), 20, Some(21), Outcome::Sold, Some(3)),
            op(None, 30, Some(31), Outcome::Busy, None),
            op(Some("q"), 40, None, Outcome::Unknown, None),
        ]);
        let steps = steps(&h, Reading::Strict).unwrap();
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].effect, Effect::Take(3));
        assert_eq!((steps[0].call, steps[0].ret), (5, Some(12)));
        assert_eq!(steps[0].ops, vec![1, 2, 3]);
        assert_eq!(steps[1].effect, Effect::TakeAny);
        assert_eq!(steps[1].ret, None);
    }

    #[test]
    fn two_answers_of_one_id_break_the_rule() {
        let h = history(vec![
            op(Some("r"), 1, Some(2), Outcome::Sold, Some(3)),
            op(Some("r"), 5, Some(6), Outcome::SoldOut, None),
        ]);
        assert_eq!(
            steps(&h, Reading::SoldOutSaysNothing).unwrap_err().ops,
            [0, 1]
        );
        let h = history(vec![
            op(Some("r"), 1, Some(2), Outcome::Sold, Some(3)),
            op(Some("r"), 5, Some(6), Outcome::Sold, Some(2)),
        ]);
        assert!(steps(&h, Reading::Strict).is_err());
    }

    #[test]
    fn a_sold_out_id_takes_nothing_when_sold_out_says_nothing() {
        let h = history(vec![
            op(Some("r"), 1, None, Outcome::Unknown, None),
            op(Some("r"), 5, Some(6), Outcome::SoldOut, None),
        ]);
        assert_eq!(steps(&h, Reading::Strict).unwrap()[0].effect, Effect::Empty);
        assert!(steps(&h, Reading::SoldOutSaysNothing).unwrap().is_empty());
    }
}
