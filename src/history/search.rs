//! Is there an order of the steps, each at one moment of its window, that
//! the spec allows? Wing & Gong's search with Lowe's memoisation, as
//! Porcupine does it.
//!
//! The calls and returns of the steps, sorted by time, make one list. The
//! search walks it from the head: at a call, it tries to put that step next
//! in the order (the spec must allow it, and the set of steps ordered so
//! far with the stock after it must be new: a configuration already tried
//! failed then and would fail again); at a return, the step it closes was
//! never ordered, so the last choice is taken back and the next one tried.
//! A step put in the order leaves the list, so the head is always the
//! earliest call or return of what is left.
//!
//! Three shortcuts, all exact: a step that only looks at the stock (a "sold
//! out", a reading) is put in the order as soon as it may be, and never
//! taken back for an alternative (whatever order exists with it later
//! exists with it now); a step that may never have happened (an unknown
//! attempt) has no return to wait for; and when unknown attempts can only
//! take units nobody names, they are interchangeable, so they are ordered
//! in the order of their calls (any order using some of them uses as well
//! the earliest called as many): k of them are k + 1 cases, not 2^k.

use std::collections::HashMap;
use std::time::Instant;

use super::spec::{Effect, Stock, Units};
use super::steps::Step;

/// What the search found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Found {
    /// An order exists.
    Ordered,
    /// Every way was tried: none exists.
    NoOrder,
    /// The deadline came first: nothing is known.
    OutOfTime,
}

const HEAD: usize = 0;
const NIL: usize = usize::MAX;

/// One call or return in the list.
#[derive(Clone, Copy)]
struct Entry {
    step: usize,
    call: bool,
}

/// A step put in the order, to take back.
struct Frame {
    step: usize,
    before: Stock,
    choice: usize,
    /// An observation: never tried elsewhere (see the module's doc).
    looked: bool,
}

/// Searches for an order of `steps` in the spec of a stock of `initial`.
pub(super) fn search(initial: u32, steps: &[Step], deadline: Instant) -> Found {
    if !counts_allow(initial, steps) {
        return Found::NoOrder;
    }
    let marked: Vec<(Effect, bool)> = steps.iter().map(|s| (s.effect, s.must())).collect();
    let units = Units::new(initial, &marked);
    Search::new(&units, steps).run(deadline)
}

struct Search<'a> {
    units: &'a Units,
    steps: &'a [Step],
    /// `entries[e - 1]`, `e` from 1; `HEAD` is the list's sentinel.
    entries: Vec<Entry>,
    next: Vec<usize>,
    prev: Vec<usize>,
    call_entry: Vec<usize>,
    ret_entry: Vec<Option<usize>>,
    /// The steps ordered so far, and its Zobrist hash.
    ordered: Vec<u64>,
    ordered_hash: u64,
    keys: Vec<u64>,
    /// Configurations tried: (ordered, stock), by hash.
    tried: HashMap<u64, Vec<(Vec<u64>, Stock)>>,
    stock: Stock,
    must_left: usize,
    /// With interchangeable unknown attempts: each one's rank by call, and
    /// how many are ordered (always the first ones).
    any_rank: Option<Vec<usize>>,
    any_done: usize,
}

impl<'a> Search<'a> {
    fn new(units: &'a Units, steps: &'a [Step]) -> Self {
        let mut timed: Vec<(u64, u8, usize)> = Vec::with_capacity(steps.len() * 2);
        for (i, step) in steps.iter().enumerate() {
            timed.push((step.call, 0, i));
            if let Some(ret) = step.ret {
                timed.push((ret, 1, i));
            }
        }
        // At one instant, calls first: two steps that touch are concurrent.
        timed.sort_unstable();
        let entries: Vec<Entry> = timed
            .iter()
            .map(|&(_, kind, step)| Entry {
                step,
                call: kind == 0,
            })
            .collect();
        let n = entries.len();
        let mut call_entry = vec![0; steps.len()];
        let mut ret_entry = vec![None; steps.len()];
        for (k, entry) in entries.iter().enumerate() {
            if entry.call {
                call_entry[entry.step] = k + 1;
            } else {
                ret_entry[entry.step] = Some(k + 1);
            }
        }
        let any_rank = (units.choices(Effect::TakeAny) == 1).then(|| {
            let mut rank = vec![usize::MAX; steps.len()];
            let calls = entries.iter().filter(|e| e.call);
            let anys = calls.filter(|e| steps[e.step].effect == Effect::TakeAny);
            for (r, entry) in anys.enumerate() {
                rank[entry.step] = r;
            }
            rank
        });
        let next = (0..=n).map(|e| if e < n { e + 1 } else { NIL }).collect();
        let prev = (0..=n).map(|e| e.wrapping_sub(1)).collect();
        Search {
            units,
            steps,
            entries,
            next,
            prev,
            call_entry,
            ret_entry,
            ordered: vec![0; steps.len().div_ceil(64)],
            ordered_hash: 0,
            keys: (0..steps.len() as u64).map(splitmix).collect(),
            tried: HashMap::new(),
            stock: units.init(),
            must_left: steps.iter().filter(|s| s.must()).count(),
            any_rank,
            any_done: 0,
        }
    }

    fn run(mut self, deadline: Instant) -> Found {
        let mut stack: Vec<Frame> = Vec::new();
        let mut cursor = self.next[HEAD];
        let mut turns = 0u64;
        loop {
            if self.must_left == 0 {
                return Found::Ordered;
            }
            turns += 1;
            if turns.is_multiple_of(4096) && Instant::now() > deadline {
                return Found::OutOfTime;
            }
            let fall_back = if cursor == NIL {
                true
            } else {
                let entry = self.entries[cursor - 1];
                if !entry.call {
                    true
                } else {
                    match self.try_step(entry.step, 0) {
                        Try::Took(frame) => {
                            stack.push(frame);
                            cursor = self.next[HEAD];
                            false
                        }
                        // This configuration with the observation was tried
                        // already, so this one without it fails too.
                        Try::Tried if self.steps[entry.step].effect.observes() => true,
                        Try::Tried | Try::Refused => {
                            cursor = self.next[cursor];
                            false
                        }
                    }
                }
            };
            if fall_back {
                match self.back(&mut stack) {
                    Some(next) => cursor = next,
                    None => return Found::NoOrder,
                }
            }
        }
    }

    /// Takes back the last choice and moves on: to the next way of the same
    /// step, or past its call. `None` when nothing is left to take back.
    fn back(&mut self, stack: &mut Vec<Frame>) -> Option<usize> {
        loop {
            let frame = stack.pop()?;
            self.undo(&frame);
            if frame.looked {
                continue;
            }
            let step = frame.step;
            if let Try::Took(again) = self.try_step(step, frame.choice + 1) {
                stack.push(again);
                return Some(self.next[HEAD]);
            }
            return Some(self.next[self.call_entry[step]]);
        }
    }

    /// Puts `step` next in the order, in its first way from `from` that the
    /// spec allows and that leads somewhere new.
    fn try_step(&mut self, step: usize, from: usize) -> Try {
        let effect = self.steps[step].effect;
        if let Some(rank) = &self.any_rank
            && effect == Effect::TakeAny
            && rank[step] != self.any_done
        {
            return Try::Refused;
        }
        let mut seen = false;
        for choice in from..self.units.choices(effect) {
            let Some(after) = self.units.step(&self.stock, effect, choice) else {
                continue;
            };
            flip(&mut self.ordered, step);
            let hash = (self.ordered_hash ^ self.keys[step]).wrapping_mul(31) ^ after.digest();
            let bucket = self.tried.entry(hash).or_default();
            if bucket
                .iter()
                .any(|(o, s)| *o == self.ordered && *s == after)
            {
                flip(&mut self.ordered, step);
                seen = true;
                continue;
            }
            bucket.push((self.ordered.clone(), after.clone()));
            self.ordered_hash ^= self.keys[step];
            self.lift(step);
            let before = std::mem::replace(&mut self.stock, after);
            return Try::Took(Frame {
                step,
                before,
                choice,
                looked: effect.observes(),
            });
        }
        if seen { Try::Tried } else { Try::Refused }
    }

    fn undo(&mut self, frame: &Frame) {
        flip(&mut self.ordered, frame.step);
        self.ordered_hash ^= self.keys[frame.step];
        self.stock = frame.before.clone();
        self.unlift(frame.step);
    }

    /// Takes `step`'s call and return out of the list.
    fn lift(&mut self, step: usize) {
        if self.steps[step].effect == Effect::TakeAny {
            self.any_done += 1;
        }
        self.unlink(self.call_entry[step]);
        if let Some(ret) = self.ret_entry[step] {
            self.unlink(ret);
            self.must_left -= 1;
        }
    }

    /// Puts them back, in the reverse order of taking them out.
    fn unlift(&mut self, step: usize) {
        if self.steps[step].effect == Effect::TakeAny {
            self.any_done -= 1;
        }
        if let Some(ret) = self.ret_entry[step] {
            self.relink(ret);
            self.must_left += 1;
        }
        self.relink(self.call_entry[step]);
    }

    fn unlink(&mut self, e: usize) {
        let (p, n) = (self.prev[e], self.next[e]);
        self.next[p] = n;
        if n != NIL {
            self.prev[n] = p;
        }
    }

    fn relink(&mut self, e: usize) {
        let (p, n) = (self.prev[e], self.next[e]);
        self.next[p] = e;
        if n != NIL {
            self.prev[n] = e;
        }
    }
}

/// A necessary condition, checked before searching: every observation's
/// count lies between the least and the most the stock can hold within its
/// window (the least: every sale called by its end took a unit and only
/// the give-backs answered before it began came back; the most: only the
/// sales answered before it began took one, and every give-back called by
/// its end came back). A "sold out" told while thousands of units remained
/// fails here at once, where the search would try every order of the sales
/// around it before giving up.
fn counts_allow(initial: u32, steps: &[Step]) -> bool {
    let sorted = |pick: &dyn Fn(&Step) -> Option<u64>| {
        let mut times: Vec<u64> = steps.iter().filter_map(pick).collect();
        times.sort_unstable();
        times
    };
    let takes = |s: &Step| matches!(s.effect, Effect::Take(_) | Effect::TakeAny);
    let gives = |s: &Step| matches!(s.effect, Effect::Give(_));
    let take_calls = sorted(&|s| takes(s).then_some(s.call));
    let take_rets = sorted(&|s| if takes(s) { s.ret } else { None });
    let give_calls = sorted(&|s| gives(s).then_some(s.call));
    let give_rets = sorted(&|s| if gives(s) { s.ret } else { None });
    let at_most = |times: &[u64], t: u64| times.partition_point(|&x| x <= t) as i64;
    let before = |times: &[u64], t: u64| times.partition_point(|&x| x < t) as i64;
    steps.iter().all(|s| {
        let want = match s.effect {
            Effect::Empty => 0,
            Effect::Count(r) => i64::from(r),
            _ => return true,
        };
        let Some(end) = s.ret else { return true };
        let least = i64::from(initial) + before(&give_rets, s.call) - at_most(&take_calls, end);
        let most = i64::from(initial) + at_most(&give_calls, end) - before(&take_rets, s.call);
        least <= want && want <= most
    })
}

enum Try {
    Took(Frame),
    /// Allowed, but every way leads where the search has been.
    Tried,
    /// Not allowed here.
    Refused,
}

fn flip(bits: &mut [u64], i: usize) {
    bits[i / 64] ^= 1 << (i % 64);
}

/// A well-mixed 64-bit key per step (SplitMix64), the same every run.
fn splitmix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
