//! `none`: no lock at all. Each buyer reads the stock, works, and writes
//! the stock less one: two buyers between one's read and the other's write
//! both sell the unit they read.

use super::steps::{Steps, claim_first};
use super::{At, Sale, World, section};
use crate::wire::Said;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    Claim,
    Enter,
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
        claim_first(sale, Pc::Claim, Pc::Enter)
    }

    fn step(self, sale: &Sale, w: &mut World, n: u8) -> Option<Pc> {
        Some(match self {
            Pc::Claim if sale.claim(w, n) => Pc::Enter,
            Pc::Claim => Pc::Done,
            // Nothing to take: straight in.
            Pc::Enter => Pc::Read,
            // Nothing to let go at its release.
            pc => return sale.ending(w, n, pc.at(), &ENDING, |_, _, _| {}),
        })
    }

    fn at(self) -> At {
        match self {
            Pc::Claim => At::Claim,
            Pc::Enter => At::Start,
            Pc::Read => At::Read,
            Pc::Work => At::Work,
            Pc::Write => At::Write,
            Pc::Release => At::Release,
            Pc::Done => At::Done,
        }
    }

    fn says(self, sale: &Sale, before: &World, after: &World, n: u8) -> Said {
        match self {
            Pc::Enter => crate::said!("goes in (no lock)", "进入临界区(没有锁)"),
            pc => section::says(sale, pc.at(), before, after, n),
        }
    }
}
