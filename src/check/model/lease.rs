//! `watchdog`, `fenced`, `etcd`, `zookeeper`: the buyer's own lock with a
//! lease, waited for while another holds it. A watchdog (etcd's and
//! ZooKeeper's session) renews the lease while the process lives, and the
//! section asks it, and its local deadline, before the write. `fenced`,
//! `etcd` and `zookeeper` take a fencing token with the lock, and the
//! ledger refuses a read or a write with a token lower than one it saw.

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
    /// The watchdog's word: is the lock still held?
    Check,
    Write,
    Release,
    Done,
}

/// Where the shared ending ([`section::Ending`]) sends this protocol's buyer.
const ENDING: section::Ending<Pc> = section::Ending {
    work: Pc::Work,
    check: Some(Pc::Check),
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
            // Waits while the key is there; then takes it (and its token).
            Pc::Acquire if w.lock.is_some() => return None,
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
            Pc::Check => At::Check,
            Pc::Write => At::Write,
            Pc::Release => At::Release,
            Pc::Done => At::Done,
        }
    }

    /// From its grant to its write.
    fn renewing(self) -> bool {
        matches!(
            self,
            Pc::WaitReplica | Pc::Read | Pc::Work | Pc::Check | Pc::Write
        )
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
