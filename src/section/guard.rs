//! What a variant tells the section about the lock around it: who holds
//! it, the fencing token the store must admit, whether it is still held,
//! and its lease.

use std::time::Duration;

/// What the variant around the section knows about its lock.
pub struct Guard<'a, F: Fn() -> bool> {
    /// Who holds the lock (owner, and fencing token), for the witness;
    /// `None` for variants without an owner.
    pub holder: Option<&'a str>,
    /// The fencing token the store must admit for the read and the write
    /// (`fenced`, `etcd`, `zookeeper`); `None`: plain reads, unfenced writes.
    pub fence: Option<Fence<'a>>,
    /// Asked right before the write: a lock that knows it lost its lease
    /// (the watchdog's failed renewal) backs off instead of writing; locks
    /// that cannot know always answer `true`.
    pub still_held: F,
    /// The lease the lock was taken with, for the timeline; `None`: no lease.
    pub lease: Option<Duration>,
}

impl<F: Fn() -> bool> Guard<'_, F> {
    /// The same guard, its lock taken with `lease` (for the timeline).
    pub fn leased(self, lease: Duration) -> Self {
        Self {
            lease: Some(lease),
            ..self
        }
    }
}

/// A fencing token and the clock that issued it. The store compares a
/// token only with tokens of the same source and store: the `fenced`
/// counter, etcd's revisions and ZooKeeper's czxids count differently, and
/// a fresh etcd or ZooKeeper starts counting again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fence<'a> {
    /// The variant whose lock issued it (`fenced`, `etcd`, `zookeeper`).
    pub source: &'a str,
    /// Which store of that source: etcd's cluster id, the ZooKeeper
    /// ensemble's id; empty for `fenced`, whose counter lives beside the
    /// stock (a Redis that lost it lost the ledger too).
    pub store: &'a str,
    pub token: i64,
}

/// The section with no lock around it, or a lock that cannot know it was lost.
pub fn unguarded() -> Guard<'static, fn() -> bool> {
    Guard {
        holder: None,
        fence: None,
        still_held: || true,
        lease: None,
    }
}
