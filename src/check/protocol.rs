//! Each variant's protocol as the model runs it: how it takes the lock,
//! whether a watchdog renews it, whether the ledger checks a fence, how it
//! lets go. The commands are the variant's own, in its order (see each
//! variant's file and `crate::section`: read, business work, the
//! watchdog's word, write, release).

use crate::variants::Variant;

/// How a buyer takes the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquire {
    /// `none`: no lock at all.
    Nothing,
    /// `local-mutex`: its process's mutex, waited for.
    LocalMutex,
    /// `setnx`: SETNX, then EXPIRE as a second command; busy if taken.
    SetNx,
    /// `setnx-expiry`: SETNX with its expiry time as the value; if taken,
    /// GET the time and, if it has passed by the buyer's clock, GETSET.
    SetNxExpiry,
    /// `token`: SET NX PX with the buyer's token; busy if taken.
    SetNxPx,
    /// `watchdog`, `fenced`, `etcd`, `zookeeper`: the buyer's own lock
    /// with a lease, waited for while someone holds it.
    Waiting,
    /// `redlock`: SET NX PX on each node in turn; with a majority it
    /// holds the lock, otherwise it lets go of what it got and tries again.
    Majority,
    /// The `lua` family: the whole sale is one script, no lock.
    Atomic,
}

/// How a buyer lets go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    Nothing,
    /// DEL, whoever's lock it is.
    Del,
    /// Deletes the lock only if it still holds the buyer's token.
    CompareAndDelete,
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
    pub acquire: Acquire,
    pub release: Release,
    /// A watchdog (or an etcd / ZooKeeper session) renews the lease while
    /// its process lives, and the section asks it before the write.
    pub watchdog: bool,
    pub fence: Fence,
    /// The lock's store acknowledges a write once a majority of its members
    /// has it (etcd, ZooKeeper): a failover loses nothing acknowledged.
    pub consensus: bool,
    pub enqueue: Enqueue,
}

impl Protocol {
    /// The protocol of `variant`.
    pub fn of(variant: Variant) -> Protocol {
        let p = |acquire, release, watchdog, fence| Protocol {
            acquire,
            release,
            watchdog,
            fence,
            consensus: matches!(variant, Variant::Etcd | Variant::ZooKeeper),
            enqueue: match variant {
                Variant::LuaThenQueue => Enqueue::AfterScript,
                Variant::LuaStream => Enqueue::InScript,
                _ => Enqueue::None,
            },
        };
        match variant {
            Variant::None => p(Acquire::Nothing, Release::Nothing, false, Fence::None),
            Variant::LocalMutex => p(Acquire::LocalMutex, Release::Nothing, false, Fence::None),
            Variant::Setnx => p(Acquire::SetNx, Release::Del, false, Fence::None),
            Variant::SetnxExpiry => p(Acquire::SetNxExpiry, Release::Del, false, Fence::None),
            Variant::Token => p(
                Acquire::SetNxPx,
                Release::CompareAndDelete,
                false,
                Fence::None,
            ),
            Variant::Watchdog => p(
                Acquire::Waiting,
                Release::CompareAndDelete,
                true,
                Fence::None,
            ),
            Variant::Fenced | Variant::Etcd | Variant::ZooKeeper => p(
                Acquire::Waiting,
                Release::CompareAndDelete,
                true,
                Fence::Checked,
            ),
            Variant::Lua
            | Variant::LuaBatch
            | Variant::LuaSharded
            | Variant::LuaThenQueue
            | Variant::LuaStream => p(Acquire::Atomic, Release::Nothing, false, Fence::None),
            Variant::Redlock => p(
                Acquire::Majority,
                Release::CompareAndDelete,
                true,
                Fence::None,
            ),
        }
    }
}
