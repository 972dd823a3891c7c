//! `redlock`: SET NX PX with the buyer's token on each node in turn; with
//! votes from a majority of all the nodes, counted within the lease (its
//! validity), it holds the lock; otherwise it lets go of what it got and
//! tries again. Its watchdog extends the lease on every node while the
//! process lives, and the lock is lost when fewer than a majority kept it.
//! The release is a compare-and-delete on every node.

use super::steps::{Steps, claim_first};
use super::{At, LockKey, Sale, World, section};
use crate::wire::Said;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    Claim,
    Acquire,
    /// SET NX PX on the next node.
    Vote,
    /// A majority, or let go of what it got and try again.
    Count,
    Read,
    Work,
    /// The watchdog's word: does a majority still hold the lock?
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
        let i = usize::from(n);
        Some(match self {
            Pc::Claim if sale.claim(w, n) => Pc::Acquire,
            Pc::Claim => Pc::Done,
            // A round begins: its validity runs from now.
            Pc::Acquire => {
                w.buyers[i].asked = 0;
                w.buyers[i].votes = 0;
                w.buyers[i].started = w.now;
                vote(sale, w, n)
            }
            Pc::Vote => vote(sale, w, n),
            Pc::Count => {
                let votes = w.buyers[i].votes.count_ones() as u8;
                let needed = match sale.mutation.one_vote {
                    true => 1,
                    false => sale.majority(),
                };
                let valid =
                    w.now < w.buyers[i].started + sale.bounds.lease || sale.mutation.no_validity;
                if votes >= needed && valid {
                    w.buyers[i].renewed = w.now;
                    Pc::Read
                } else {
                    // No quorum (or a round slower than the lease): let go
                    // of what it got, and try again.
                    release(w, n);
                    Pc::Acquire
                }
            }
            pc => return sale.ending(w, n, pc.at(), &ENDING, |_, w, n| release(w, n)),
        })
    }

    fn at(self) -> At {
        match self {
            Pc::Claim => At::Claim,
            Pc::Acquire => At::Start,
            Pc::Vote | Pc::Count => At::Round,
            Pc::Read => At::Read,
            Pc::Work => At::Work,
            Pc::Check => At::Check,
            Pc::Write => At::Write,
            Pc::Release => At::Release,
            Pc::Done => At::Done,
        }
    }

    /// From its majority to its write.
    fn renewing(self) -> bool {
        matches!(self, Pc::Read | Pc::Work | Pc::Check | Pc::Write)
    }

    fn says(self, sale: &Sale, before: &World, after: &World, n: u8) -> Said {
        let (was, now) = (
            &before.buyers[usize::from(n)],
            &after.buyers[usize::from(n)],
        );
        match self {
            Pc::Acquire | Pc::Vote => {
                let k = match self {
                    Pc::Acquire => 0,
                    _ => was.asked,
                };
                let k = k + 1;
                match now.votes & (1 << (k - 1)) {
                    0 => crate::said!("is refused by node {k}", "被节点 {k} 拒绝"),
                    _ => crate::said!("gets node {k}", "拿到节点 {k} 的票"),
                }
            }
            Pc::Count if now.pc.at() == At::Read => {
                let votes = was.votes.count_ones();
                crate::said!(
                    "holds a majority ({votes} nodes)",
                    "拿到多数票({votes} 个节点)"
                )
            }
            Pc::Count if was.votes.count_ones() as u8 >= sale.majority() => {
                crate::said!(
                    "counts a majority, but its round outlived the lease: lets go, tries again",
                    "数到多数票,但这一轮用的时间超过了租约:放弃锁,重试"
                )
            }
            Pc::Count => crate::said!(
                "has no majority: lets go, tries again",
                "没有拿到多数票:放弃锁,重试"
            ),
            pc => section::says(sale, pc.at(), before, after, n),
        }
    }
}

/// SET NX PX on the next node (a node that is down says no); after the
/// last one, count.
fn vote(sale: &Sale, w: &mut World, n: u8) -> Pc {
    let i = usize::from(n);
    let k = usize::from(w.buyers[i].asked);
    let node = &mut w.nodes[k];
    if node.up && node.lock.is_none() {
        node.lock = Some(LockKey {
            owner: Some(n),
            holder: n,
            expires: Some(w.now + sale.bounds.lease),
            value: 0,
        });
        w.buyers[i].votes |= 1 << k;
    }
    w.buyers[i].asked += 1;
    match w.buyers[i].asked == sale.bounds.nodes {
        true => Pc::Count,
        false => Pc::Vote,
    }
}

/// Compare-and-delete on every node that is up.
fn release(w: &mut World, n: u8) {
    for node in w.nodes.iter_mut().filter(|node| node.up) {
        if node.lock.is_some_and(|lock| lock.owner == Some(n)) {
            node.lock = None;
        }
    }
    w.buyers[usize::from(n)].votes = 0;
}
