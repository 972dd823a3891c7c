//! Which protocol each variant runs in the model, and what its store adds:
//! whether the ledger checks a fence, whether the store is a consensus
//! store, how a sale's order message is queued. Each protocol's steps are
//! a file of [`super::model`], in the variant's own order of commands
//! (see each variant's file and `crate::section`).

use crate::variants::Variant;

/// Which protocol's program a buyer runs (each one a file of
/// [`super::model`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Program {
    /// `none`: no lock at all.
    None,
    /// `local-mutex`: its process's mutex, waited for.
    LocalMutex,
    /// `setnx`: SETNX, then EXPIRE as a second command; busy if taken.
    SetNx,
    /// `setnx-expiry`: SETNX with its expiry time as the value; if taken,
    /// GET the time and, if it has passed by the buyer's clock, GETSET.
    SetNxExpiry,
    /// `token`: SET NX PX with the buyer's token; busy if taken.
    Token,
    /// `watchdog`, `fenced`, `etcd`, `zookeeper`: the buyer's own lock
    /// with a lease, waited for while someone holds it, renewed.
    Lease,
    /// `redlock`: SET NX PX on each node in turn; with a majority it
    /// holds the lock, otherwise it lets go of what it got and tries again.
    Redlock,
    /// The `lua` family: the whole sale is one script, no lock.
    Script,
    /// `pg-update`: the id's answer looked up, then one conditional
    /// UPDATE (the sale's row and the id's answer with it), a second
    /// statement recording a sold-out answer.
    Update,
    /// `pg-optimistic`: read with the version, work, a version-checked
    /// write; a refused write reads again, up to its tries.
    Optimistic,
    /// `redis-then-pg`: Redis's pre-decrement, then the database's
    /// optimistic sale (read with the version, work, version-checked
    /// write), each a step of its own; the database answers a buyer Redis
    /// turned away.
    RedisThenPg,
    /// `pg-for-update`, `pg-advisory`: the database's lock, held by the
    /// buyer's transaction from the grant to its commit, no lease; a dead
    /// holder's transaction is rolled back and its lock freed.
    Transaction,
    /// `pg-batch`: a batch's transaction, the row's lock taken first, the
    /// ids looked up under it, the batch written with the commit.
    Batch,
}

/// Whether the ledger checks a fencing token on the read and the write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fence {
    None,
    /// A token taken after the lock (`fenced`: INCR; etcd's revision and
    /// ZooKeeper's czxid come with the lock but are checked the same way),
    /// refused when lower than the highest the ledger saw.
    Checked,
}

/// How a sale's order message gets onto the SKU's stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enqueue {
    /// No orders.
    None,
    /// `lua-then-queue`: the buyer's XADD, a second command after the script.
    AfterScript,
    /// `lua-stream`: the script's own XADD.
    InScript,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Protocol {
    pub program: Program,
    pub fence: Fence,
    /// The lock's store acknowledges a write once a majority of its members
    /// has it (etcd, ZooKeeper): a failover loses nothing acknowledged.
    pub consensus: bool,
    pub enqueue: Enqueue,
    /// The stock and its ledger are PostgreSQL's: a crash of the database
    /// rolls back every open transaction and keeps what it committed.
    pub database: bool,
}

impl Protocol {
    /// The protocol of `variant`.
    pub fn of(variant: Variant) -> Protocol {
        let program = match variant {
            Variant::None => Program::None,
            Variant::LocalMutex => Program::LocalMutex,
            Variant::Setnx => Program::SetNx,
            Variant::SetnxExpiry => Program::SetNxExpiry,
            Variant::Token => Program::Token,
            Variant::Watchdog | Variant::Fenced | Variant::Etcd | Variant::ZooKeeper => {
                Program::Lease
            }
            Variant::Redlock => Program::Redlock,
            Variant::Lua
            | Variant::LuaBatch
            | Variant::LuaSharded
            | Variant::LuaThenQueue
            | Variant::LuaStream => Program::Script,
            // The database's atomic writes: a conditional UPDATE, or a
            // write refused unless the version read is still the row's.
            Variant::PgUpdate => Program::Update,
            Variant::PgOptimistic => Program::Optimistic,
            Variant::RedisThenPg => Program::RedisThenPg,
            // The database's locks: held by the transaction.
            Variant::PgForUpdate | Variant::PgAdvisory => Program::Transaction,
            // A batch's transaction under the row's lock.
            Variant::PgBatch => Program::Batch,
        };
        Protocol {
            program,
            fence: match variant {
                Variant::Fenced | Variant::Etcd | Variant::ZooKeeper => Fence::Checked,
                _ => Fence::None,
            },
            consensus: matches!(variant, Variant::Etcd | Variant::ZooKeeper),
            database: variant.stock_in_postgres(),
            enqueue: match variant {
                Variant::LuaThenQueue => Enqueue::AfterScript,
                Variant::LuaStream => Enqueue::InScript,
                _ => Enqueue::None,
            },
        }
    }

    /// A watchdog (or an etcd / ZooKeeper session) renews the lease while
    /// its process lives, and the section asks it before the write.
    pub fn watchdog(&self) -> bool {
        matches!(self.program, Program::Lease | Program::Redlock)
    }

    /// Whether a buyer holds a lock with a lease (not a mutex, not a script).
    pub fn leased(&self) -> bool {
        !matches!(
            self.program,
            Program::None
                | Program::LocalMutex
                | Program::Script
                | Program::Update
                | Program::Optimistic
                | Program::RedisThenPg
                | Program::Transaction
                | Program::Batch
        )
    }

    /// Whether the database holds a lock for the buyer's transaction (the
    /// row's, or an advisory one), one for every instance.
    pub fn database_lock(&self) -> bool {
        matches!(self.program, Program::Transaction | Program::Batch)
    }

    /// Whether the stock is kept in two stores (`redis-then-pg`): the
    /// database's books are the truth, and a buyer Redis turns away must
    /// not be told sold out while the database holds stock.
    pub fn two_stores(&self) -> bool {
        self.program == Program::RedisThenPg
    }
}
