//! `pg-for-update`, `pg-advisory`: a lock the database holds for the
//! buyer's transaction (the stock row's, or an advisory lock on the SKU),
//! one for every buyer of every instance. No lease: it is held from the
//! grant to the commit, however long the work or a frozen process takes,
//! and waited for meanwhile. The write and the commit are one step (the
//! write is seen only once committed, and the commit lets the lock go);
//! a holder that dies takes its transaction with it, the lock freed
//! (`crate::check::faults`: a crash frees a buyer's mutex, and this lock
//! is the one mutex of the database). With ids in play (a crash of the
//! database), the commit records the id's answer with the sale, and a
//! buyer whose transaction died asks again: an answered id is replayed.

use super::steps::{Steps, claim_first};
use super::{At, Sale, World, section};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    Claim,
    Acquire,
    Read,
    Work,
    /// The write, and the commit that releases the lock.
    Commit,
    /// Its transaction died with the database, or its commit's answer
    /// did: asks again with its request id.
    Retry,
    Done,
}

impl Steps for Pc {
    const DONE: Pc = Pc::Done;

    fn start(sale: &Sale) -> Pc {
        claim_first(sale, Pc::Claim, Pc::Acquire)
    }

    fn step(self, sale: &Sale, w: &mut World, n: u8) -> Option<Pc> {
        // One lock for all: the database's (`Sale::process_of` is 0).
        let lock = sale.process_of(n);
        Some(match self {
            Pc::Claim if sale.claim(w, n) => Pc::Acquire,
            Pc::Claim => Pc::Done,
            // Waits while another transaction holds it.
            Pc::Acquire if w.mutexes[lock].is_some() => return None,
            Pc::Acquire => {
                w.mutexes[lock] = Some(n);
                w.buyers[usize::from(n)].holds_mutex = true;
                Pc::Read
            }
            Pc::Read if sale.read(w, n) => Pc::Work,
            // Sold out: the transaction commits its answer, the lock goes.
            Pc::Read => {
                record(sale, w, n, false);
                sale.free_mutex(w, n);
                Pc::Done
            }
            Pc::Work if !sale.worked(w, n) => return None,
            Pc::Work => Pc::Commit,
            Pc::Commit => {
                let before = w.sold.iter().map(|&k| u32::from(k)).sum::<u32>();
                sale.write(w, n);
                let sold = w.sold.iter().map(|&k| u32::from(k)).sum::<u32>() > before;
                record(sale, w, n, sold);
                sale.free_mutex(w, n);
                Pc::Done
            }
            // The database answers an id it has a record of from it.
            Pc::Retry if answered(sale, w, n) => Pc::Done,
            Pc::Retry => Pc::Acquire,
            Pc::Done => return None,
        })
    }

    fn at(self) -> At {
        match self {
            Pc::Claim => At::Claim,
            Pc::Acquire => At::Start,
            Pc::Read => At::Read,
            Pc::Work => At::Work,
            Pc::Commit => At::Write,
            Pc::Retry => At::Retry,
            Pc::Done => At::Done,
        }
    }

    fn moment(self) -> &'static str {
        match self {
            Pc::Commit => "before its write and commit",
            pc => pc.at().moment(),
        }
    }

    fn says(self, sale: &Sale, before: &World, after: &World, n: u8) -> String {
        match self {
            Pc::Acquire => section::says_taken(before, after, n),
            Pc::Retry if after.buyers[usize::from(n)].pc == Pc::Done.into() => {
                "asks again with its request id: its answer replayed".to_owned()
            }
            Pc::Retry => {
                "asks again with its request id: none recorded, it starts again".to_owned()
            }
            pc => section::says(sale, pc.at(), before, after, n),
        }
    }
}

/// With ids in play, the commit records the id's answer in the same
/// transaction; the sales under each id are counted (one per id, the
/// property says).
fn record(sale: &Sale, w: &mut World, n: u8, sold: bool) {
    if !sale.ids_in_commits() {
        return;
    }
    if !sale.mutation.no_request_claim {
        w.answered |= 1 << n;
    }
    if sold {
        w.script_sales[usize::from(n)] += 1;
    }
}

/// Whether the database has a record of buyer `n`'s request id.
fn answered(sale: &Sale, w: &World, n: u8) -> bool {
    !sale.mutation.no_request_claim && w.answered & (1 << n) != 0
}
