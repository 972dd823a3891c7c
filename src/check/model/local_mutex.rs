//! `local-mutex`: a mutex in each process. The buyers of one process take
//! turns; two processes each hold their own, so two buyers of the SKU are
//! in the section at once across instances.

use super::steps::{Steps, claim_first};
use super::{At, Sale, World, section};
use crate::wire::Said;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    Claim,
    Acquire,
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
        let process = sale.process_of(n);
        Some(match self {
            Pc::Claim if sale.claim(w, n) => Pc::Acquire,
            Pc::Claim => Pc::Done,
            // Waits while another buyer of its process holds the mutex.
            Pc::Acquire if w.mutexes[process].is_some() => return None,
            Pc::Acquire => {
                w.mutexes[process] = Some(n);
                w.buyers[usize::from(n)].holds_mutex = true;
                Pc::Read
            }
            pc => return sale.ending(w, n, pc.at(), &ENDING, Sale::free_mutex),
        })
    }

    fn at(self) -> At {
        match self {
            Pc::Claim => At::Claim,
            Pc::Acquire => At::Start,
            Pc::Read => At::Read,
            Pc::Work => At::Work,
            Pc::Write => At::Write,
            Pc::Release => At::Release,
            Pc::Done => At::Done,
        }
    }

    fn says(self, sale: &Sale, before: &World, after: &World, n: u8) -> Said {
        match self {
            Pc::Acquire => section::says_taken(before, after, n),
            pc => section::says(sale, pc.at(), before, after, n),
        }
    }
}
