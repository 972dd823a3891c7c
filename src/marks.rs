//! Sold-out marks: after a flash sale's stock is gone, most of its traffic
//! is buyers who will be told "sold out". An instance that heard Redis say
//! so for a SKU marks the SKU and answers the next buyers itself, without a
//! round trip.
//!
//! A mark may only ever refuse a buyer, never sell: the one thing it can
//! get wrong is a SKU restocked meanwhile, whose buyers it then refuses
//! (undersells) until it goes. Three things bound that:
//!
//! - a reset announces itself ([`crate::ledger::RESET_CHANNEL`]), and so does
//!   a unit an expired reservation gave back ([`GIVEN_BACK_CHANNEL`]); every
//!   instance drops the SKU's marks on hearing either;
//! - a mark lives for a short TTL at most, so an announcement lost (the
//!   subscription reconnecting) heals by itself;
//! - a mark is only set from an answer whose request started after the
//!   last reset this instance heard of ([`SoldOutMarks::generation`]): a
//!   sold-out answer read before a reset and returned after its
//!   announcement is not turned into a mark of the new stock.
//!
//! The scripted variants (`lua`, `lua-sharded`) use marks by default; the
//! lock variants only when a request asks (`sold_out_mark=1`), so that what
//! they teach (every buyer takes the lock) is unchanged unless asked.
//! Every buyer a mark refused is counted in the SKU's ledger
//! (`mark_refusals`), so that under-selling by marks shows.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::knobs::Sku;

/// How long a mark lives by default.
pub const DEFAULT_MARK_TTL: Duration = Duration::from_secs(1);

/// Where `give_back.lua` announces a unit back in stock (the message: the
/// SKU), so that every instance drops the SKU's marks as on a reset.
pub const GIVEN_BACK_CHANNEL: &str = "stocklock:given_back";

/// How many SKUs an instance keeps marks for before it starts over.
const MARKS_KEPT: usize = 10_000;

/// One instance's marks, by SKU and by whether the SKU's stock was read
/// from its buckets (`lua-sharded`) or from its one stock key.
pub struct SoldOutMarks {
    ttl: Duration,
    /// By SKU: the mark of its one stock key, and of its buckets.
    marks: Mutex<HashMap<Sku, [Option<Mark>; 2]>>,
    /// Grows with every reset heard of (and every lost subscription).
    generation: AtomicU64,
}

#[derive(Clone, Copy, Debug)]
struct Mark {
    /// The stock Redis reported (0, or below for an oversold SKU).
    remaining: i64,
    until: Instant,
}

impl SoldOutMarks {
    /// Marks that live `ttl` at most (zero: no marks at all).
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            marks: Mutex::default(),
            generation: AtomicU64::new(0),
        }
    }

    /// Read before a request asks Redis; handed back to [`Self::set`].
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The remaining stock of a marked SKU, or `None`: ask Redis.
    pub fn check(&self, sku: &Sku, sharded: bool) -> Option<i64> {
        let mut marks = self.marks.lock().unwrap_or_else(PoisonError::into_inner);
        let both = marks.get_mut(sku)?;
        let slot = &mut both[usize::from(sharded)];
        match slot {
            Some(mark) if mark.until > Instant::now() => Some(mark.remaining),
            Some(_) => {
                *slot = None;
                if both.iter().all(Option::is_none) {
                    marks.remove(sku);
                }
                None
            }
            None => None,
        }
    }

    /// Redis said `sku` is sold out to a request that started at
    /// `generation`: mark it, unless a reset was heard of since.
    pub fn set(&self, sku: &Sku, sharded: bool, remaining: i64, generation: u64) {
        if self.ttl.is_zero() {
            return;
        }
        let mut marks = self.marks.lock().unwrap_or_else(PoisonError::into_inner);
        // Checked under the lock that `reset` also takes: a reset heard of
        // after this check removes the mark set here.
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        if marks.len() >= MARKS_KEPT {
            marks.clear();
        }
        let until = Instant::now() + self.ttl;
        marks.entry(sku.clone()).or_default()[usize::from(sharded)] =
            Some(Mark { remaining, until });
    }

    /// A reset of `sku`, or a unit given back to its stock, was announced:
    /// its marks go.
    pub fn reset(&self, sku: &Sku) {
        let mut marks = self.marks.lock().unwrap_or_else(PoisonError::into_inner);
        self.generation.fetch_add(1, Ordering::AcqRel);
        marks.remove(sku);
    }

    /// Announcements may have been missed: every mark goes.
    pub fn forget_all(&self) {
        let mut marks = self.marks.lock().unwrap_or_else(PoisonError::into_inner);
        self.generation.fetch_add(1, Ordering::AcqRel);
        marks.clear();
    }

    /// How many SKUs are marked (expired marks included until next looked at).
    pub fn len(&self) -> usize {
        self.marks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sku(s: &str) -> Sku {
        Sku::parse(s).unwrap()
    }

    #[test]
    fn a_mark_answers_until_its_ttl_or_a_reset() {
        let marks = SoldOutMarks::new(Duration::from_secs(60));
        let g = marks.generation();
        assert_eq!(marks.check(&sku("a"), false), None);
        marks.set(&sku("a"), false, 0, g);
        assert_eq!(marks.check(&sku("a"), false), Some(0));
        // The sharded and the plain stock of a SKU are marked apart.
        assert_eq!(marks.check(&sku("a"), true), None);
        marks.reset(&sku("a"));
        assert_eq!(marks.check(&sku("a"), false), None);

        let short = SoldOutMarks::new(Duration::from_nanos(1));
        short.set(&sku("b"), false, -2, short.generation());
        std::thread::sleep(Duration::from_millis(1));
        assert_eq!(short.check(&sku("b"), false), None);
        assert!(
            short.is_empty(),
            "an expired mark is dropped when looked at"
        );
    }

    #[test]
    fn an_answer_read_before_a_reset_does_not_mark_the_new_stock() {
        let marks = SoldOutMarks::new(Duration::from_secs(60));
        let started = marks.generation();
        // The reset is heard of while the request's answer is on its way.
        marks.reset(&sku("c"));
        marks.set(&sku("c"), false, 0, started);
        assert_eq!(marks.check(&sku("c"), false), None);
        let started = marks.generation();
        marks.forget_all();
        marks.set(&sku("c"), false, 0, started);
        assert_eq!(marks.check(&sku("c"), false), None);
    }

    #[test]
    fn zero_ttl_marks_nothing() {
        let marks = SoldOutMarks::new(Duration::ZERO);
        marks.set(&sku("d"), false, 0, marks.generation());
        assert_eq!(marks.check(&sku("d"), false), None);
    }
}
