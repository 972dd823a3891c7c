//! What every protocol's program is made of, below the protocol files
//! and the [`super::Pc`] that dispatches to them: the [`Steps`] each one
//! implements, where a lock variant's buyer starts, and [`At`], what the
//! rest of the checker (the faults, the clock, the drawings) sees of
//! where a buyer is.

use super::{Sale, World};
use crate::wire::Said;

/// What a protocol's program says of its steps.
pub(super) trait Steps: Copy {
    /// Where a buyer of this protocol ends.
    const DONE: Self;
    /// Where a buyer starts: claiming its request id, or taking its lock.
    fn start(sale: &Sale) -> Self;
    /// Buyer `n`'s next step from `self`: its effect on the world, and
    /// where the buyer goes next; `None` while its guard is false (the
    /// step cannot happen now, and nothing changed).
    fn step(self, sale: &Sale, w: &mut World, n: u8) -> Option<Self>;
    /// The kind of step `self` is.
    fn at(self) -> At;
    /// Whether a watchdog renews the buyer's lock while it is here.
    fn renewing(self) -> bool {
        false
    }
    /// Where the buyer is, in a few words (where a freeze finds it).
    fn moment(self) -> Said {
        self.at().moment()
    }
    /// What buyer `n`'s step from `self` did, between `before` and `after`.
    fn says(self, sale: &Sale, before: &World, after: &World, n: u8) -> Said;
}

/// Where a lock variant's buyer starts: claiming its request id first
/// when every buyer retries one, or at `first` (a script checks the id
/// itself).
/// A database buyer asking for its request id's answer, in words: the
/// record answered it (`true`), or there is none yet.
pub(super) fn asks_for_its_answer(answered: bool) -> Said {
    match answered {
        true => crate::said!(
            "asks the database for its id's answer: answered from its record",
            "向数据库查询它的 ID 的答复:按记录答复"
        ),
        false => crate::said!(
            "asks the database for its id's answer: none yet",
            "向数据库查询它的 ID 的答复:还没有"
        ),
    }
}

/// A database buyer asking again with its request id, none recorded.
pub(super) fn asks_again() -> Said {
    crate::said!(
        "asks again with its request id: none recorded",
        "用它的请求 ID 再问一次:没有记录"
    )
}

pub(super) fn claim_first<P>(sale: &Sale, claim: P, first: P) -> P {
    match sale.claims_ids() {
        true => claim,
        false => first,
    }
}

/// Where a database protocol's buyer starts: asking the database for its
/// request id's answer first when ids are in play (its record, looked up
/// before anything else), or at `first`.
pub(super) fn answer_first<P>(sale: &Sale, answered: P, first: P) -> P {
    match sale.script_id(0) {
        Some(_) => answered,
        None => first,
    }
}

/// The kinds of step every protocol's program is made of: what a fault,
/// the clock or a drawing needs to know of where a buyer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    /// About to claim its request id.
    Claim,
    /// Before its first command: taking its lock, or its sale's script.
    Start,
    /// Taking over a lock it found held (`setnx-expiry`).
    Taking,
    /// In Redlock's round of votes.
    Round,
    /// Holding its lock, before its read (`setnx`'s EXPIRE, a WAIT).
    Held,
    Read,
    /// In its business work.
    Work,
    /// About to hear its watchdog's word.
    Check,
    Write,
    Release,
    /// Its sale made, a second command to send (`lua-then-queue`'s XADD).
    After,
    /// Asking again with its request id, its call cut off.
    Retry,
    Done,
}

impl At {
    /// Where a buyer here is, in a few words.
    pub fn moment(self) -> Said {
        match self {
            At::Round => crate::said!("in the middle of its round of votes", "在它一轮投票的中途"),
            At::Taking => crate::said!("while taking an expired lock over", "正在接管一把过期的锁"),
            At::Read => crate::said!("before its read", "在读库存之前"),
            At::Work => crate::said!("in its business work", "在业务处理中"),
            At::Check => crate::said!("before its watchdog's word", "在听到看门狗的消息之前"),
            At::Write => crate::said!("before its write", "在写库存之前"),
            At::Release => crate::said!("before its release", "在释放锁之前"),
            _ => crate::said!("in its section", "在临界区内"),
        }
    }

    /// Past its first command and not yet done: where a fault can find it
    /// mid-way.
    pub fn in_section(self) -> bool {
        !matches!(self, At::Start | At::Claim | At::Retry | At::Done)
    }

    /// Inside its critical section: holding its lock (or, with none,
    /// from its read) until it lets go.
    pub fn inside(self) -> bool {
        matches!(
            self,
            At::Held | At::Read | At::Work | At::Check | At::Write | At::Release
        )
    }
}
