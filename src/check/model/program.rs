//! Where a buyer is: its protocol's program counter. Each protocol has
//! its own enum and step function, in its own file; [`Pc`] is the one of
//! them a buyer runs, and [`At`] is what the rest of the checker (the
//! faults, the clock, the drawings) sees of it.

use super::{
    Sale, World, lease, local_mutex, none, redis_then_pg, redlock, script, setnx, setnx_expiry,
    token, transaction,
};
use crate::check::protocol::Program;

/// What a protocol's program says of its steps.
pub(super) trait Steps: Copy + Into<Pc> {
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
    fn moment(self) -> &'static str {
        self.at().moment()
    }
    /// What buyer `n`'s step from `self` did, between `before` and `after`.
    fn says(self, sale: &Sale, before: &World, after: &World, n: u8) -> String;
}

/// Where a lock variant's buyer starts: claiming its request id first
/// when every buyer retries one, or at `first` (a script checks the id
/// itself).
pub(super) fn claim_first<P>(sale: &Sale, claim: P, first: P) -> P {
    match sale.claims_ids() {
        true => claim,
        false => first,
    }
}

/// A buyer's program counter, in its variant's protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pc {
    None(none::Pc),
    LocalMutex(local_mutex::Pc),
    SetNx(setnx::Pc),
    SetNxExpiry(setnx_expiry::Pc),
    Token(token::Pc),
    Lease(lease::Pc),
    Redlock(redlock::Pc),
    Script(script::Pc),
    RedisThenPg(redis_then_pg::Pc),
    Transaction(transaction::Pc),
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
    pub fn moment(self) -> &'static str {
        match self {
            At::Round => "in the middle of its round of votes",
            At::Taking => "while taking an expired lock over",
            At::Read => "before its read",
            At::Work => "in its business work",
            At::Check => "before its watchdog's word",
            At::Write => "before its write",
            At::Release => "before its release",
            _ => "in its section",
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

/// `$body` with `$p` bound to the protocol's own program counter.
macro_rules! each {
    ($pc:expr, $p:ident => $body:expr) => {
        match $pc {
            Pc::None($p) => $body,
            Pc::LocalMutex($p) => $body,
            Pc::SetNx($p) => $body,
            Pc::SetNxExpiry($p) => $body,
            Pc::Token($p) => $body,
            Pc::Lease($p) => $body,
            Pc::Redlock($p) => $body,
            Pc::Script($p) => $body,
            Pc::RedisThenPg($p) => $body,
            Pc::Transaction($p) => $body,
        }
    };
}

macro_rules! wrap {
    ($($module:ident => $variant:ident),*) => {$(
        impl From<$module::Pc> for Pc {
            fn from(pc: $module::Pc) -> Pc {
                Pc::$variant(pc)
            }
        }
    )*};
}

wrap!(none => None, local_mutex => LocalMutex, setnx => SetNx, setnx_expiry => SetNxExpiry,
    token => Token, lease => Lease, redlock => Redlock, script => Script,
    redis_then_pg => RedisThenPg, transaction => Transaction);

fn done<S: Steps>(_: S) -> Pc {
    S::DONE.into()
}

impl Pc {
    /// Where a buyer of `sale` starts.
    pub fn start(sale: &Sale) -> Pc {
        match sale.protocol.program {
            Program::None => none::Pc::start(sale).into(),
            Program::LocalMutex => local_mutex::Pc::start(sale).into(),
            Program::SetNx => setnx::Pc::start(sale).into(),
            Program::SetNxExpiry => setnx_expiry::Pc::start(sale).into(),
            Program::Token => token::Pc::start(sale).into(),
            Program::Lease => lease::Pc::start(sale).into(),
            Program::Redlock => redlock::Pc::start(sale).into(),
            Program::Script => script::Pc::start(sale).into(),
            Program::RedisThenPg => redis_then_pg::Pc::start(sale).into(),
            Program::Transaction => transaction::Pc::start(sale).into(),
        }
    }

    /// Buyer `n`'s next step (`None`: it cannot take it now).
    pub fn step(self, sale: &Sale, w: &mut World, n: u8) -> Option<Pc> {
        each!(self, p => p.step(sale, w, n).map(Into::into))
    }

    pub fn at(self) -> At {
        each!(self, p => p.at())
    }

    pub fn renewing(self) -> bool {
        each!(self, p => p.renewing())
    }

    pub fn moment(self) -> &'static str {
        each!(self, p => p.moment())
    }

    pub fn says(self, sale: &Sale, before: &World, after: &World, n: u8) -> String {
        each!(self, p => p.says(sale, before, after, n))
    }

    /// Where a buyer goes when its attempt dies with the database, or its
    /// answer does: asking again with its request id (the database's
    /// protocols; any other ends).
    pub fn retry(self) -> Pc {
        match self {
            Pc::Script(_) => script::Pc::Retry.into(),
            Pc::RedisThenPg(_) => redis_then_pg::Pc::Retry.into(),
            Pc::Transaction(_) => transaction::Pc::Retry.into(),
            other => other.done(),
        }
    }

    /// Where this buyer's program ends.
    pub fn done(self) -> Pc {
        each!(self, p => done(p))
    }

    pub fn is_done(self) -> bool {
        self.at() == At::Done
    }
}
