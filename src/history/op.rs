//! The history's format: JSON Lines, one SKU's `initial` before its
//! operations, each operation as its client saw it (call and return times
//! in nanoseconds on one clock, and the answer).
//!
//! ```text
//! {"sku":"a","initial":3}
//! {"sku":"a","client":7,"id":"r1","call":100,"ret":250,"outcome":"sold","unit":3}
//! {"sku":"a","client":8,"call":120,"outcome":"unknown"}
//! {"sku":"a","client":0,"call":900,"ret":950,"outcome":"read","remaining":2}
//! ```
//!
//! Parsing is strict about what the spec reads (a `sold` without its unit,
//! a return before its call, an operation of a SKU never declared are
//! errors naming the line) and ignores fields it does not read, so a
//! recorder may add its own (`instance`, `note`).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// What the client was told (or that it was told nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Unit `unit` was sold to this request.
    Sold,
    /// The stock is empty.
    SoldOut,
    /// Refused, nothing changed (lock held, wait timed out, a version
    /// conflict, a store that was not reached, bad input).
    Busy,
    /// The write may or may not have happened: a 503 `unknown`, an error
    /// after sending, or no answer at all.
    Unknown,
    /// Unit `unit` was given back to the stock (an expired reservation, a
    /// refusal after a pre-decrement).
    Returned,
    /// The books of the store that holds the stock's truth said
    /// `remaining` units are left.
    Read,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Sold => "sold",
            Outcome::SoldOut => "sold_out",
            Outcome::Busy => "busy",
            Outcome::Unknown => "unknown",
            Outcome::Returned => "returned",
            Outcome::Read => "read",
        }
    }
}

/// One line of the file: a SKU's declaration or one operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Line {
    /// `{"sku":"a","initial":3}`: the SKU starts with units `1..=initial`.
    Declare {
        sku: String,
        initial: u32,
    },
    Op(Op),
}

/// `{"sku","initial"}`, read on its own for a clear error.
#[derive(Deserialize)]
struct Declaration {
    sku: String,
    initial: u32,
}

/// One operation of one client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    pub sku: String,
    /// Who sent it (a worker, a buyer): only for the picture.
    pub client: u64,
    /// The request id: every attempt of one id is one purchase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// When it was sent, ns.
    pub call: u64,
    /// When its answer came, ns; absent when none came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ret: Option<u64>,
    pub outcome: Outcome,
    /// With `sold` and `returned`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<u32>,
    /// With `read`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining: Option<u32>,
    /// A recorder's remark, shown in the picture (which instance answered,
    /// which request): never read by the checker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One SKU's history: its initial stock and its operations, each with the
/// line it came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SkuHistory {
    pub sku: String,
    pub initial: u32,
    pub ops: Vec<Op>,
    /// `lines[i]` is the file's line (1-based) of `ops[i]`.
    pub lines: Vec<usize>,
}

/// A history that cannot be read: what is wrong and on which line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadLine {
    pub line: usize,
    pub why: String,
}

impl fmt::Display for BadLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.why)
    }
}

impl std::error::Error for BadLine {}

/// Reads a whole history, partitioned per SKU (in the order the SKUs were
/// declared). Blank lines are skipped.
pub fn parse(text: &str) -> Result<Vec<SkuHistory>, BadLine> {
    let mut skus: Vec<SkuHistory> = Vec::new();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    for (n, raw) in text.lines().enumerate() {
        let line = n + 1;
        let bad = |why: String| BadLine { line, why };
        if raw.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value =
            serde_json::from_str(raw).map_err(|err| bad(format!("not JSON: {err}")))?;
        // A declaration is the line with `initial`; anything else is an
        // operation, and its own error says which field is wrong.
        let parsed = if value.get("initial").is_some() {
            serde_json::from_value(value).map(|d: Declaration| Line::Declare {
                sku: d.sku,
                initial: d.initial,
            })
        } else {
            serde_json::from_value(value).map(Line::Op)
        }
        .map_err(|err| bad(err.to_string()))?;
        match parsed {
            Line::Declare { sku, initial } => {
                if index.contains_key(&sku) {
                    return Err(bad(format!("SKU {sku:?} is declared twice")));
                }
                index.insert(sku.clone(), skus.len());
                skus.push(SkuHistory {
                    sku,
                    initial,
                    ..SkuHistory::default()
                });
            }
            Line::Op(op) => {
                let Some(&at) = index.get(&op.sku) else {
                    return Err(bad(format!(
                        "SKU {:?} has no declaration {{\"sku\":{:?},\"initial\":N}} before it",
                        op.sku, op.sku
                    )));
                };
                check_op(&op, skus[at].initial).map_err(bad)?;
                skus[at].ops.push(op);
                skus[at].lines.push(line);
            }
        }
    }
    Ok(skus)
}

/// What one operation must carry to be read by the spec.
fn check_op(op: &Op, initial: u32) -> Result<(), String> {
    if let Some(ret) = op.ret
        && ret < op.call
    {
        return Err(format!("ret {ret} is before call {}", op.call));
    }
    match op.outcome {
        Outcome::Sold | Outcome::Returned => {
            let Some(unit) = op.unit else {
                return Err(format!("{} needs its \"unit\"", op.outcome.as_str()));
            };
            // A sold unit outside `1..=initial` (0: one below the stock, a
            // store decremented past zero) is a finding, not bad input: the
            // store sold what it never had. A returned one is bad input.
            if op.outcome == Outcome::Returned && !(1..=initial).contains(&unit) {
                return Err(format!(
                    "unit {unit} returned, but only 1..={initial} exist"
                ));
            }
        }
        Outcome::Read if op.remaining.is_none() => {
            return Err("read needs its \"remaining\"".into());
        }
        _ => {}
    }
    let definitive = !matches!(op.outcome, Outcome::Unknown);
    if definitive && op.ret.is_none() {
        return Err(format!(
            "{} is an answer, so it needs \"ret\" (an operation with no answer is \"unknown\")",
            op.outcome.as_str()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_declarations_and_operations_per_sku() {
        let text = r#"{"sku":"a","initial":2}
{"sku":"b","initial":1}
{"sku":"a","client":1,"id":"r1","call":1,"ret":5,"outcome":"sold","unit":2}

{"sku":"b","client":2,"call":2,"outcome":"unknown","instance":"a"}
{"sku":"a","client":0,"call":9,"ret":10,"outcome":"read","remaining":1}
"#;
        let skus = parse(text).unwrap();
        assert_eq!(skus.len(), 2);
        assert_eq!(skus[0].ops.len(), 2);
        assert_eq!(skus[0].lines, vec![3, 6]);
        assert_eq!(skus[1].ops[0].ret, None);
        assert_eq!(skus[0].ops[0].id.as_deref(), Some("r1"));
    }

    #[test]
    fn bad_lines_are_named() {
        let cases = [
            (
                r#"{"sku":"a","client":1,"call":1,"ret":2,"outcome":"busy"}"#,
                1,
                "no declaration",
            ),
            (
                "{\"sku\":\"a\",\"initial\":1}\n{\"sku\":\"a\",\"client\":1,\"call\":5,\"ret\":2,\"outcome\":\"busy\"}",
                2,
                "before call",
            ),
            (
                "{\"sku\":\"a\",\"initial\":1}\n{\"sku\":\"a\",\"client\":1,\"call\":1,\"ret\":2,\"outcome\":\"sold\"}",
                2,
                "needs its \"unit\"",
            ),
            (
                "{\"sku\":\"a\",\"initial\":1}\n{\"sku\":\"a\",\"client\":1,\"call\":1,\"outcome\":\"sold_out\"}",
                2,
                "needs \"ret\"",
            ),
            (
                "{\"sku\":\"a\",\"initial\":1}\n{\"sku\":\"a\",\"initial\":2}",
                2,
                "declared twice",
            ),
            ("{\"sku\":\"a\",\"initial\":1}\nnot json", 2, "not JSON"),
            (
                "{\"sku\":\"a\",\"initial\":1}\n{\"sku\":\"a\",\"client\":1,\"call\":1,\"ret\":2,\"outcome\":\"stolen\"}",
                2,
                "unknown variant `stolen`",
            ),
        ];
        for (text, line, why) in cases {
            let err = parse(text).unwrap_err();
            assert_eq!(err.line, line, "{text}");
            assert!(err.why.contains(why), "{text}: {}", err.why);
        }
    }
}
