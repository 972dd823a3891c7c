//! The recorder: the client side's account of a run, in the history's
//! format. Whoever sends the requests (the load generator's workers, the
//! lab's buyers, the soak's buyers) notes each one's call, its return and
//! what it was told, on one clock; a request whose instance died is a call
//! with no answer. It never asks the servers what happened.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::op::{BadLine, Line, Op, Outcome, SkuHistory};

/// A run's history being written. Cloning shares it.
#[derive(Clone, Debug)]
pub struct Recorder {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Put before every SKU's name in the history (a lab cell's
    /// `scenario/variant/`), so that many runs' histories can share a file.
    prefix: String,
    origin: Instant,
    next_client: AtomicU64,
    book: Mutex<Book>,
}

#[derive(Debug, Default)]
struct Book {
    lines: Vec<Line>,
    /// A SKU's name in the history now: reset again, it is a new stock,
    /// named `sku#2`, `sku#3`, ...
    current: HashMap<String, String>,
    epochs: HashMap<String, u32>,
    /// Operations of SKUs never declared: they cannot be judged.
    undeclared: u64,
    /// Pieces of request paths whose requests are recorded as given no
    /// answer, whatever they are told (see [`Recorder::silence`]).
    silenced: Vec<String>,
}

/// A request on its way: the stock it was sent to, and when.
#[derive(Clone, Debug)]
pub struct Call {
    name: Option<String>,
    at: u64,
}

/// What one request was told, as the recorder reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Told {
    /// A sale of this unit (0 for one below the stock's first).
    Sold(u32),
    SoldOut,
    /// Refused, and nothing was sent to the store (busy, bad input, a store
    /// not reached).
    Refused,
    /// An answer that does not say whether the write happened (a 503
    /// `unknown`, a 502 from nginx whose instance died, a timeout).
    Unknown,
    /// No answer at all.
    Nothing,
}

impl Told {
    /// What a `/deductStock` answer told, by the stack's contract: 200 a
    /// sale (of the unit its body names), 409 sold out, 429 busy, 503
    /// `unknown` unknown, any other 503 a store not reached (nothing sent),
    /// 4xx refused; any other status (a 502 or 504 of nginx whose instance
    /// died or hung) cannot say whether the write happened. Status 0: no
    /// answer came.
    pub fn from_answer(status: u16, unknown: bool, unit: Option<i64>) -> Told {
        match status {
            0 => Told::Nothing,
            // A unit below 1 (a store decremented past zero) is a sale of
            // a unit that never existed: unit 0, which no stock holds.
            200 => match unit {
                Some(unit) => Told::Sold(count(unit)),
                None => Told::Unknown,
            },
            409 => Told::SoldOut,
            503 if unknown => Told::Unknown,
            503 | 400..=499 => Told::Refused,
            _ => Told::Unknown,
        }
    }
}

/// A count or unit number the history can hold (0 for less).
fn count(n: i64) -> u32 {
    n.clamp(0, i64::from(u32::MAX)) as u32
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    pub fn new() -> Self {
        Self::prefixed("")
    }

    /// A recorder whose SKUs are named `prefix` + their name.
    pub fn prefixed(prefix: &str) -> Self {
        Recorder {
            inner: Arc::new(Inner {
                prefix: prefix.to_owned(),
                origin: Instant::now(),
                next_client: AtomicU64::new(1),
                book: Mutex::new(Book::default()),
            }),
        }
    }

    /// Now, on the history's clock (ns since the recorder began).
    pub fn now(&self) -> u64 {
        self.at(Instant::now())
    }

    /// `instant` on the history's clock.
    pub fn at(&self, instant: Instant) -> u64 {
        instant
            .saturating_duration_since(self.inner.origin)
            .as_nanos() as u64
    }

    /// A client number nobody else has.
    pub fn client(&self) -> u64 {
        self.inner.next_client.fetch_add(1, Ordering::Relaxed)
    }

    /// `sku` starts now with units `1..=initial` (a reset). A negative stock
    /// is none. Its name in the history (`sku`, or `sku#2` for its second
    /// stock, ...).
    pub fn declare(&self, sku: &str, initial: i64) -> String {
        let mut book = self.book();
        let epoch = book.epochs.entry(sku.to_owned()).or_insert(0);
        *epoch += 1;
        let prefix = &self.inner.prefix;
        let name = match *epoch {
            1 => format!("{prefix}{sku}"),
            n => format!("{prefix}{sku}#{n}"),
        };
        book.current.insert(sku.to_owned(), name.clone());
        book.lines.push(Line::Declare {
            sku: name.clone(),
            initial: count(initial),
        });
        name
    }

    /// A request to `sku` is being sent now: its SKU's stock as of now (an
    /// answer that comes after a reset still belongs to the stock it was
    /// sent to).
    pub fn call(&self, sku: &str) -> Call {
        self.call_at(sku, Instant::now())
    }

    /// The same, sent at `instant`.
    pub fn call_at(&self, sku: &str, instant: Instant) -> Call {
        Call {
            name: self.book().current.get(sku).cloned(),
            at: self.at(instant),
        }
    }

    /// What the request of `call` was told, now.
    pub fn told(&self, call: Call, client: u64, id: Option<&str>, told: Told) {
        self.told_at(call, client, id, told, Instant::now());
    }

    /// What the request of `call` was told, at `instant`.
    pub fn told_at(&self, call: Call, client: u64, id: Option<&str>, told: Told, instant: Instant) {
        let ret = (told != Told::Nothing).then(|| self.at(instant));
        let (outcome, unit) = match told {
            Told::Sold(unit) => (Outcome::Sold, Some(unit)),
            Told::SoldOut => (Outcome::SoldOut, None),
            Told::Refused => (Outcome::Busy, None),
            Told::Unknown | Told::Nothing => (Outcome::Unknown, None),
        };
        let mut book = self.book();
        let Some(sku) = call.name else {
            book.undeclared += 1;
            return;
        };
        book.lines.push(Line::Op(Op {
            sku,
            client,
            id: id.map(str::to_owned),
            call: call.at,
            ret,
            outcome,
            unit,
            remaining: None,
            note: None,
        }));
    }

    /// The books of the store holding `sku`'s truth said `remaining` are
    /// left, read between `call` and now.
    pub fn read(&self, sku: &str, call: u64, remaining: i64) {
        let ret = self.now();
        self.observed(
            sku,
            (call, ret),
            Outcome::Read,
            (None, Some(count(remaining))),
        );
    }

    /// From now on, a request whose path holds `marker` is recorded as
    /// given no answer, whatever it is told: its client is as good as dead
    /// (a buyer the explorer crashed, which it lets go once the schedule
    /// is over, so that nobody stays held, and which may still answer).
    pub fn silence(&self, marker: &str) {
        self.book().silenced.push(marker.to_owned());
    }

    /// Whether a request at `path` is one [`Recorder::silence`] named.
    pub fn silenced(&self, path: &str) -> bool {
        self.book()
            .silenced
            .iter()
            .any(|m| path.contains(m.as_str()))
    }

    /// Unit `unit` of `sku` came back to the stock (a reservation that
    /// expired, a stock restored), at some moment between `call` and now.
    pub fn returned(&self, sku: &str, call: u64, unit: i64) {
        self.returned_between(sku, call, self.now(), unit);
    }

    /// Unit `unit` of `sku` came back to the stock at some moment between
    /// `call` and `ret` (both on this recorder's clock, `ret` at most now):
    /// a return the store timed itself.
    pub fn returned_between(&self, sku: &str, call: u64, ret: u64, unit: i64) {
        let ret = ret.clamp(call, self.now().max(call));
        let unit = (Some(count(unit)), None);
        self.observed(sku, (call, ret), Outcome::Returned, unit);
    }

    /// What the recorder itself saw of the store (no client's request),
    /// between `call` and `ret`: a unit, or a count left.
    fn observed(
        &self,
        sku: &str,
        (call, ret): (u64, u64),
        outcome: Outcome,
        (unit, remaining): (Option<u32>, Option<u32>),
    ) {
        self.push(Op {
            sku: sku.to_owned(),
            client: 0,
            id: None,
            call,
            ret: Some(ret),
            outcome,
            unit,
            remaining,
            note: None,
        });
    }

    fn push(&self, mut op: Op) {
        let mut book = self.book();
        match book.current.get(&op.sku) {
            Some(name) => {
                op.sku = name.clone();
                book.lines.push(Line::Op(op));
            }
            None => book.undeclared += 1,
        }
    }

    /// The SKUs declared so far, as they were asked for (without the
    /// prefix or the `#2` of a later stock), each once.
    pub fn skus(&self) -> Vec<String> {
        let mut skus: Vec<String> = self.book().epochs.keys().cloned().collect();
        skus.sort();
        skus
    }

    /// Operations left out because their SKU was never declared.
    pub fn undeclared(&self) -> u64 {
        self.book().undeclared
    }

    /// The history so far, as JSON Lines.
    pub fn text(&self) -> String {
        let book = self.book();
        let mut text = String::new();
        for line in &book.lines {
            text.push_str(&serde_json::to_string(line).unwrap_or_default());
            text.push('\n');
        }
        text
    }

    /// The history so far, per SKU, as the checker reads it (what the
    /// recorder writes, the parser reads: one format, and an answer the
    /// spec cannot read, a sale of unit 0, is an error here too).
    pub fn histories(&self) -> Result<Vec<SkuHistory>, BadLine> {
        super::op::parse(&self.text())
    }

    /// The histories of the SKUs named `names` (as [`Recorder::declare`]
    /// returned them).
    pub fn histories_of(&self, names: &[String]) -> Result<Vec<SkuHistory>, BadLine> {
        let mut all = self.histories()?;
        all.retain(|h| names.contains(&h.sku));
        Ok(all)
    }

    /// Writes the history to `path`.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.text())
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        // A panic elsewhere while holding it leaves a history still worth writing.
        self.inner
            .book
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_reset_is_a_new_stock_and_undeclared_skus_are_counted() {
        let r = Recorder::new();
        r.declare("a", 2);
        let c = r.client();
        r.told(r.call("a"), c, Some("x"), Told::Sold(2));
        r.told(r.call("b"), c, None, Told::SoldOut);
        // Sent before the second reset, answered after it: the first stock's.
        let late = r.call("a");
        r.declare("a", 1);
        r.told(late, c, None, Told::SoldOut);
        r.told(r.call("a"), c, None, Told::Nothing);
        r.read("a", r.now(), 1);
        let skus = r.histories().unwrap();
        assert_eq!(skus.len(), 2);
        assert_eq!((skus[0].sku.as_str(), skus[0].initial), ("a", 2));
        assert_eq!(skus[0].ops[0].unit, Some(2));
        assert_eq!(skus[0].ops[1].outcome, Outcome::SoldOut);
        assert_eq!(skus[1].sku, "a#2");
        assert_eq!(skus[1].ops[0].ret, None);
        assert_eq!(skus[1].ops[1].remaining, Some(1));
        assert_eq!(r.undeclared(), 1);
        let p = Recorder::prefixed("race/lua/");
        assert_eq!(p.declare("a", 1), "race/lua/a");
    }
}
