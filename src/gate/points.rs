//! The section's own gates, in its order; each lock adds its own between
//! `before_acquire` and `after_acquire` (`after_setnx`, `vote:K`, ...).

use crate::lock::Point;

pub const BEFORE_ACQUIRE: Point = Point::new("before_acquire");
pub const AFTER_ACQUIRE: Point = Point::new("after_acquire");
pub const AFTER_READ: Point = Point::new("after_read");
/// After the business work, before the watchdog's word.
pub const BEFORE_CHECK: Point = Point::new("before_check");
/// After the last check of the lock, right before the write.
pub const BEFORE_WRITE: Point = Point::new("before_write");
pub const BEFORE_RELEASE: Point = Point::new("before_release");
pub const AFTER_RELEASE: Point = Point::new("after_release");
/// `setnx`: between SETNX and EXPIRE.
pub const AFTER_SETNX: Point = Point::new("after_setnx");
/// A watchdog's renewal, before it is sent (`watchdog`, `fenced`,
/// `redlock`): held, it comes late.
pub const RENEWAL: Point = crate::lock::RENEWAL;
/// After it: its outcome (renewed, or the lock lost) known to the owner.
pub const RENEWED: Point = crate::lock::RENEWED;
/// A lock on a replicated Redis (`token`, `watchdog` with
/// `replicas=N`): taken, its `WAIT` for the replicas not sent yet.
pub const BEFORE_WAIT: Point = Point::new("before_wait");
/// `redlock`: before its round's question to node K (`vote:K`).
pub const VOTE: &str = crate::lock::redlock::VOTE;
/// `etcd`: its session's lease granted, its key not queued yet.
pub const AFTER_GRANT: Point = Point::new("after_grant");
/// `etcd`, `zookeeper`: its entry queued, its turn not known yet.
pub const QUEUED: Point = crate::lock::QUEUED;
/// `redlock`: node K's answer is in (`voted:K`; only noted, never held).
pub const VOTED: &str = crate::lock::redlock::VOTED;
/// `lua-then-queue`: the sale's script has sold, its order's `XADD`
/// not sent yet.
pub const BEFORE_ENQUEUE: Point = Point::new("before_enqueue");
/// An order worker, between the commit of the buyer's order and its
/// `XACK` (the message carries the buyer's schedule).
pub const WORKER_COMMITTED: Point = Point::new("worker_committed");
/// The expiry pass: the buyer's reservation is cancelled (committed),
/// its unit not given back yet.
pub const BEFORE_GIVE_BACK: Point = Point::new("before_give_back");
