//! The locks: the `stocklock-lock` library (`crates/stocklock-lock`),
//! which the application uses only through its public API, and the
//! application's own [`LockStores`], the lock stores an instance was given.

mod stores;

pub use stocklock_lock::*;
pub use stores::{LockStores, LockStoresConfig};
