//! Where a buyer is: its protocol's program counter. Each protocol has
//! its own enum and step function, in its own file (their shared shape,
//! and [`At`], in `steps.rs`, below them); [`Pc`] is the one of them a
//! buyer runs.

use super::steps::{At, Steps};
use super::{
    Sale, World, batch, lease, local_mutex, none, optimistic, redis_then_pg, redlock, script,
    setnx, setnx_expiry, token, transaction, update,
};
use crate::check::protocol::Program;
use crate::wire::Said;

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
    Update(update::Pc),
    Optimistic(optimistic::Pc),
    RedisThenPg(redis_then_pg::Pc),
    Transaction(transaction::Pc),
    Batch(batch::Pc),
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
            Pc::Update($p) => $body,
            Pc::Optimistic($p) => $body,
            Pc::RedisThenPg($p) => $body,
            Pc::Transaction($p) => $body,
            Pc::Batch($p) => $body,
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
    token => Token, lease => Lease, redlock => Redlock, script => Script, update => Update,
    optimistic => Optimistic, redis_then_pg => RedisThenPg, transaction => Transaction,
    batch => Batch);

fn done<S: Steps + Into<Pc>>(_: S) -> Pc {
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
            Program::Update => update::Pc::start(sale).into(),
            Program::Optimistic => optimistic::Pc::start(sale).into(),
            Program::RedisThenPg => redis_then_pg::Pc::start(sale).into(),
            Program::Transaction => transaction::Pc::start(sale).into(),
            Program::Batch => batch::Pc::start(sale).into(),
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

    pub fn moment(self) -> Said {
        each!(self, p => p.moment())
    }

    pub fn says(self, sale: &Sale, before: &World, after: &World, n: u8) -> Said {
        each!(self, p => p.says(sale, before, after, n))
    }

    /// Where a buyer goes when its attempt dies with the database, or its
    /// answer does: asking again with its request id (the database's
    /// protocols; any other ends).
    pub fn retry(self) -> Pc {
        match self {
            Pc::Script(_) => script::Pc::Retry.into(),
            Pc::Update(_) => update::Pc::Retry.into(),
            Pc::Optimistic(_) => optimistic::Pc::Retry.into(),
            Pc::RedisThenPg(_) => redis_then_pg::Pc::Retry.into(),
            Pc::Transaction(_) => transaction::Pc::Retry.into(),
            Pc::Batch(_) => batch::Pc::Retry.into(),
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
