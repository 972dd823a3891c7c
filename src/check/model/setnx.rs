//! `setnx`: SETNX, then EXPIRE as a second command; busy if the key is
//! there. A holder that dies between the two leaves a lock with no TTL
//! that nobody deletes; the release is a plain DEL, whoever's lock it is.

use super::steps::{Steps, claim_first};
use super::{At, LockKey, Sale, World, section};
use crate::wire::Said;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    Claim,
    Acquire,
    /// Between SETNX and EXPIRE.
    Expire,
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
        Some(match self {
            Pc::Claim if sale.claim(w, n) => Pc::Acquire,
            Pc::Claim => Pc::Done,
            // SETNX finds the key: busy.
            Pc::Acquire if w.lock.is_some() => Pc::Done,
            // SETNX sets it, with no TTL yet.
            Pc::Acquire => {
                w.lock = Some(LockKey {
                    owner: None,
                    holder: n,
                    expires: None,
                    value: 0,
                });
                Pc::Expire
            }
            // EXPIRE sets the TTL of whatever lock is there.
            Pc::Expire => {
                if let Some(lock) = &mut w.lock {
                    lock.expires = Some(w.now + sale.bounds.lease);
                }
                Pc::Read
            }
            pc => return sale.ending(w, n, pc.at(), &ENDING, Sale::delete),
        })
    }

    fn at(self) -> At {
        match self {
            Pc::Claim => At::Claim,
            Pc::Acquire => At::Start,
            Pc::Expire => At::Held,
            Pc::Read => At::Read,
            Pc::Work => At::Work,
            Pc::Write => At::Write,
            Pc::Release => At::Release,
            Pc::Done => At::Done,
        }
    }

    fn moment(self) -> Said {
        match self {
            Pc::Expire => crate::said!("between SETNX and EXPIRE", "在 SETNX 与 EXPIRE 之间"),
            pc => pc.at().moment(),
        }
    }

    fn says(self, sale: &Sale, before: &World, after: &World, n: u8) -> Said {
        match self {
            Pc::Acquire => section::says_taken(before, after, n),
            Pc::Expire => crate::said!("sets the lock's TTL (EXPIRE)", "设置锁的 TTL(EXPIRE)"),
            pc => section::says(sale, pc.at(), before, after, n),
        }
    }
}
