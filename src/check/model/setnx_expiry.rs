//! `setnx-expiry`: SETNX with the lock's expiry time (by the buyer's
//! clock) as its value, no TTL. A buyer that finds the key reads the time;
//! if it has passed by its own clock, it takes the lock over with GETSET,
//! and holds it only if it swapped out the time it read. A clock that runs
//! ahead takes over a live lock.

use super::steps::{Steps, claim_first};
use super::{At, LockKey, Sale, World, section};
use crate::wire::Said;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    Claim,
    Acquire,
    /// The lock was there: read its expiry time next.
    ReadExpiry,
    /// It had passed by this buyer's clock: GETSET next.
    TakeOver,
    Read,
    Work,
    Write,
    Release,
    Done,
}

/// Where the shared ending ([`section::Ending`]) sends this protocol's buyer.
const ENDING: section::Ending<Pc> = section::Ending {
    work: Pc::Work,
    check: None,
    write: Pc::Write,
    release: Pc::Release,
    done: Pc::Done,
};

impl Steps for Pc {
    const DONE: Pc = Pc::Done;

    fn start(sale: &Sale) -> Pc {
        claim_first(sale, Pc::Claim, Pc::Acquire)
    }

    fn step(self, sale: &Sale, w: &mut World, n: u8) -> Option<Pc> {
        let expiry = sale.clock(w, n) + sale.bounds.lease;
        Some(match self {
            Pc::Claim if sale.claim(w, n) => Pc::Acquire,
            Pc::Claim => Pc::Done,
            // SETNX finds the key: read its time.
            Pc::Acquire if w.lock.is_some() => Pc::ReadExpiry,
            // SETNX sets it, its expiry time the value.
            Pc::Acquire => {
                w.lock = Some(LockKey {
                    owner: None,
                    holder: n,
                    expires: None,
                    value: expiry,
                });
                Pc::Read
            }
            // GET: the lock is gone (busy, try again later), or its time
            // has passed by this buyer's clock (take it over), or not (busy).
            Pc::ReadExpiry => match w.lock {
                Some(lock) if lock.value < sale.clock(w, n) => {
                    w.buyers[usize::from(n)].seen_value = lock.value;
                    Pc::TakeOver
                }
                _ => Pc::Done,
            },
            // GETSET: the new time is written whatever it swaps out; the
            // lock is this buyer's only if it swapped out the time it read
            // (otherwise another buyer took it over first).
            Pc::TakeOver => {
                let old = w.lock.map(|lock| lock.value);
                w.lock = Some(LockKey {
                    owner: None,
                    holder: n,
                    expires: None,
                    value: expiry,
                });
                let seen = w.buyers[usize::from(n)].seen_value;
                match old == Some(seen) || sale.mutation.no_getset_compare {
                    true => Pc::Read,
                    false => Pc::Done,
                }
            }
            pc => return sale.ending(w, n, pc.at(), &ENDING, Sale::delete),
        })
    }

    fn at(self) -> At {
        match self {
            Pc::Claim => At::Claim,
            Pc::Acquire => At::Start,
            Pc::ReadExpiry | Pc::TakeOver => At::Taking,
            Pc::Read => At::Read,
            Pc::Work => At::Work,
            Pc::Write => At::Write,
            Pc::Release => At::Release,
            Pc::Done => At::Done,
        }
    }

    fn says(self, sale: &Sale, before: &World, after: &World, n: u8) -> Said {
        let next = after.buyers[usize::from(n)].pc;
        match self {
            Pc::Acquire if next == Pc::ReadExpiry.into() => {
                crate::said!("finds the lock taken", "发现锁已被占用")
            }
            Pc::Acquire => section::says_taken(before, after, n),
            Pc::ReadExpiry if next == Pc::TakeOver.into() => {
                crate::said!(
                    "reads an expiry time that has passed by its clock",
                    "读到一个按它的时钟已经过去的过期时刻"
                )
            }
            Pc::ReadExpiry => crate::said!(
                "reads a live expiry time: busy",
                "读到一个还没到的过期时刻:忙"
            ),
            Pc::TakeOver if next == Pc::Read.into() => {
                crate::said!("takes the lock over (GETSET)", "接管这把锁(GETSET)")
            }
            Pc::TakeOver => crate::said!("loses the GETSET race: busy", "GETSET 抢输了:忙"),
            pc => section::says(sale, pc.at(), before, after, n),
        }
    }
}
