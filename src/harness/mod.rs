//! What every command that plays on a stack shares: the stack it starts
//! (or the running one it is pointed at), its children, a Redis paused on
//! purpose, a failover. `lab`, `replay`, `explore`, `soak` and step mode
//! sit above it, side by side.
//!
//! - [`stack`]: a `stocklock up` stack as a child, and its API.
//! - [`target`]: `--target`, a running stack instead.
//! - [`child`]: this program run again as a child for a page's work.
//! - [`pause`]: Redis paused (`DEBUG SLEEP`), seen from a connection apart.
//! - [`failover`]: a master killed, the leaders of etcd and ZooKeeper.

pub mod child;
pub mod failover;
pub mod pause;
pub mod stack;
pub mod target;

pub use target::TargetArgs;
