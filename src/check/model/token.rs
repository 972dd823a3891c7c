//! `token`: SET NX PX with the buyer's own token and a lease; busy if the
//! key is there. The release deletes the lock only if it still holds the
//! token (one script). Nothing renews the lease: work that outlives it
//! runs unprotected. Under `failover-wait` the holder asks `WAIT 1` after
//! taking the lock, and lets it go if no replica has it.

use super::steps::{Steps, claim_first};
use super::{At, Sale, World, section};
use crate::wire::Said;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    Claim,
    Acquire,
    /// `WAIT` for one replica after taking the lock.
    WaitReplica,
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
            // SET NX PX finds the key: busy.
            Pc::Acquire if w.lock.is_some() => Pc::Done,
            Pc::Acquire => {
                sale.take_lease(w, n);
                match sale.bounds.wait_replicas {
                    true => Pc::WaitReplica,
                    false => Pc::Read,
                }
            }
            Pc::WaitReplica if sale.replicated(w, n) => Pc::Read,
            Pc::WaitReplica => Pc::Done,
            pc => return sale.ending(w, n, pc.at(), &ENDING, Sale::compare_and_delete),
        })
    }

    fn at(self) -> At {
        match self {
            Pc::Claim => At::Claim,
            Pc::Acquire => At::Start,
            Pc::WaitReplica => At::Held,
            Pc::Read => At::Read,
            Pc::Work => At::Work,
            Pc::Write => At::Write,
            Pc::Release => At::Release,
            Pc::Done => At::Done,
        }
    }

    fn moment(self) -> Said {
        match self {
            Pc::WaitReplica => crate::said!("before its WAIT", "在 WAIT 之前"),
            pc => pc.at().moment(),
        }
    }

    fn says(self, sale: &Sale, before: &World, after: &World, n: u8) -> Said {
        match self {
            Pc::Acquire => section::says_taken(before, after, n),
            Pc::WaitReplica => section::says_wait(after, n),
            pc => section::says(sale, pc.at(), before, after, n),
        }
    }
}
