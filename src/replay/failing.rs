//! The replicated Redis a failover replay fails over: its master, the
//! relay that replicates it, its Sentinels (the replay's moves on it are
//! in `failover.rs`).

use std::net::SocketAddr;

use anyhow::Context;

use crate::harness::stack::Stack;
use crate::up::redis::RedisServer;

/// A failover replay's lease at least: the model's time stands still
/// while the real failover takes seconds, so no live lease may run out
/// meanwhile.
pub(super) const LEASE_MS: u64 = 10_000;

/// The replicated Redis of a failover replay's stack.
pub(super) struct Failing {
    pub(super) relay: u32,
    pub(super) master_pid: u32,
    pub(super) master: SocketAddr,
    pub(super) sentinels: Vec<String>,
    /// The new master's replica, once the replay started one.
    pub(super) replica: Option<RedisServer>,
}

impl Failing {
    /// What `stack` (from [`super::start_failover`]) offers to fail over.
    pub(super) fn of(stack: &Stack, redis_url: &str) -> anyhow::Result<Failing> {
        let relay = stack.relay.as_ref().context(
            "the stack has no replica to fail over to: replay a failover on a stack of its own",
        )?;
        Ok(Failing {
            relay: relay.pid,
            master_pid: stack
                .redis_pid
                .context("the stack announced no Redis pid")?,
            master: redis_url
                .trim_start_matches("redis://")
                .parse()
                .context("the master's address")?,
            sentinels: stack.sentinel_addrs(),
            replica: None,
        })
    }
}
