//! The sequential spec of one SKU's stock: the only thing the checker knows.
//!
//! State: `S`, the units in stock, initially `1..=initial`. Steps:
//! - `Effect::Take``(u)`, a sale of unit `u`: `u ∈ S`, then `S − {u}`;
//! - `Effect::Empty`, a "sold out": `S` is empty;
//! - `Effect::Count``(r)`, a reading of the books: `|S| = r`;
//! - `Effect::Give``(u)`, a unit given back: `u ∉ S`, then `S + {u}`;
//! - `Effect::TakeAny`, an attempt nobody knows the end of: one unit of
//!   `S`, whichever (doing nothing is its being left out of the order).
//!
//! Units no operation names are interchangeable, so the state keeps them
//! as a count (`Stock::anon`) and only the named ones one by one: the same
//! spec, without one branch per anonymous unit.

use std::hash::{Hash, Hasher};

/// What one step does to the stock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Effect {
    Take(u32),
    Empty,
    Count(u32),
    Give(u32),
    TakeAny,
}

impl Effect {
    /// A step that only looks: whenever it may happen, it may as well
    /// happen at once (it changes nothing another step could need).
    pub(super) fn observes(self) -> bool {
        matches!(self, Effect::Empty | Effect::Count(_))
    }
}

/// The units in stock: the named ones (by their dense index, see
/// `Units`) and how many anonymous ones.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Stock {
    named: Vec<u64>,
    anon: u32,
}

impl Stock {
    fn has(&self, i: usize) -> bool {
        self.named[i / 64] & (1 << (i % 64)) != 0
    }

    fn flip(&mut self, i: usize) {
        self.named[i / 64] ^= 1 << (i % 64);
    }

    pub(super) fn len(&self) -> u32 {
        self.named.iter().map(|w| w.count_ones()).sum::<u32>() + self.anon
    }

    pub(super) fn digest(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.hash(&mut h);
        h.finish()
    }
}

/// Which units the operations name, numbered densely, and which of them an
/// unknown attempt may be the one that took.
#[derive(Clone, Debug)]
pub(super) struct Units {
    initial: u32,
    /// Named unit numbers, sorted; a unit's dense index is its place here.
    named: Vec<u32>,
    /// Dense indices an unknown attempt may take: a unit it took must never
    /// be needed again by a sale that has to happen, so only units some step
    /// gives back, or that no certain sale names.
    takeable: Vec<usize>,
}

impl Units {
    /// `steps`' effects, and whether each step must happen.
    pub(super) fn new(initial: u32, steps: &[(Effect, bool)]) -> Units {
        let mut named: Vec<u32> = steps
            .iter()
            .filter_map(|(effect, _)| match effect {
                Effect::Take(u) | Effect::Give(u) if (1..=initial).contains(u) => Some(*u),
                _ => None,
            })
            .collect();
        named.sort_unstable();
        named.dedup();
        let takeable = (0..named.len())
            .filter(|&i| {
                let unit = named[i];
                let given = steps.iter().any(|(e, _)| *e == Effect::Give(unit));
                let must_take = steps
                    .iter()
                    .any(|(e, must)| *must && *e == Effect::Take(unit));
                given || !must_take
            })
            .collect();
        Units {
            initial,
            named,
            takeable,
        }
    }

    fn index(&self, unit: u32) -> Option<usize> {
        self.named.binary_search(&unit).ok()
    }

    /// `S = 1..=initial`.
    pub(super) fn init(&self) -> Stock {
        let mut stock = Stock {
            named: vec![0; self.named.len().div_ceil(64)],
            anon: self.initial - self.named.len() as u32,
        };
        for i in 0..self.named.len() {
            stock.flip(i);
        }
        stock
    }

    /// How many ways `effect` may happen (an unknown attempt: one per unit
    /// it may take).
    pub(super) fn choices(&self, effect: Effect) -> usize {
        match effect {
            Effect::TakeAny => 1 + self.takeable.len(),
            _ => 1,
        }
    }

    /// The `choice`-th way `effect` may happen in `stock`: the stock after
    /// it, or `None` when the spec does not allow it there.
    pub(super) fn step(&self, stock: &Stock, effect: Effect, choice: usize) -> Option<Stock> {
        match effect {
            Effect::Take(u) => {
                let i = self.index(u)?;
                stock.has(i).then(|| {
                    let mut next = stock.clone();
                    next.flip(i);
                    next
                })
            }
            Effect::Give(u) => {
                let i = self.index(u)?;
                (!stock.has(i)).then(|| {
                    let mut next = stock.clone();
                    next.flip(i);
                    next
                })
            }
            Effect::Empty => (stock.len() == 0).then(|| stock.clone()),
            Effect::Count(r) => (stock.len() == r).then(|| stock.clone()),
            Effect::TakeAny if choice == 0 => (stock.anon > 0).then(|| Stock {
                anon: stock.anon - 1,
                ..stock.clone()
            }),
            Effect::TakeAny => {
                let i = *self.takeable.get(choice - 1)?;
                stock.has(i).then(|| {
                    let mut next = stock.clone();
                    next.flip(i);
                    next
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_of_a_stock() {
        let steps = [
            (Effect::Take(2), true),
            (Effect::Give(1), true),
            (Effect::TakeAny, false),
        ];
        let units = Units::new(3, &steps);
        let s = units.init();
        assert_eq!(s.len(), 3);
        // Unit 2 is sold once, and not twice.
        let s = units.step(&s, Effect::Take(2), 0).unwrap();
        assert_eq!(s.len(), 2);
        assert!(units.step(&s, Effect::Take(2), 0).is_none());
        // A unit never stocked is never sold.
        assert!(units.step(&s, Effect::Take(4), 0).is_none());
        // Unit 1 is in stock: it cannot be given back until it is taken.
        assert!(units.step(&s, Effect::Give(1), 0).is_none());
        assert!(units.step(&s, Effect::Empty, 0).is_none());
        assert!(units.step(&s, Effect::Count(2), 0).is_some());
        // The unknown attempt: the anonymous unit 3, or unit 1 (given
        // back later), never unit 2 (a certain sale needs it).
        assert_eq!(units.choices(Effect::TakeAny), 2);
        let a = units.step(&s, Effect::TakeAny, 0).unwrap();
        let b = units.step(&s, Effect::TakeAny, 1).unwrap();
        assert_eq!((a.len(), b.len()), (1, 1));
        assert_ne!(a, b);
        let b = units.step(&b, Effect::Give(1), 0).unwrap();
        assert_eq!(b.len(), 2);
        let a = units.step(&a, Effect::TakeAny, 1).unwrap();
        assert!(units.step(&a, Effect::Empty, 0).is_some());
    }
}
