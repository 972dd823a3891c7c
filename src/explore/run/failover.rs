//! A failover in a schedule (`failover`, `failover-wait-early`,
//! `failover-wait`): the lock's store fails over under the buyers.
//!
//! A failover cannot be undone, so each schedule of such a cell runs on a
//! stack of its own ([`own_stack`]): for the Redis locks `up --replica`
//! (a replica replicating through a relay, three Sentinels) with the gates
//! on a Redis apart, which the failover leaves alone; for etcd and
//! ZooKeeper three members or servers. Two faults, as the model has them:
//!
//! - replication is held back (`HoldReplication`; Redis only): what the
//!   master has reaches the replica (`WAIT 1`), then the relay between
//!   them is frozen; in `failover-wait-early` only while nobody holds the
//!   lock;
//! - the master dies (`Failover`; once replication is held back): it and
//!   the relay are killed, Sentinel promotes the replica, every instance
//!   serves from it again (a buyer held at a gate meets it in its next
//!   command), and where the buyers `WAIT` for a replica a replica of the
//!   new master is started and synced (the model's old master coming back
//!   as the new one's replica). In etcd and ZooKeeper the leader dies, and
//!   the explorer waits until another leads.
//!
//! A failover loses what the old master had not replicated, the records
//! of its sales with them: a unit answered `sold` to two buyers is how an
//! oversell shows.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nix::sys::signal::Signal;

use super::super::{Choice, Redises};
use super::Run;
use crate::harness::stack::Stack;
use crate::store::Store;
use crate::up::redis::RedisServer;
use crate::variants::Variant;

/// How long a new replica may take to sync, and a new leader to be elected.
const SYNC: Duration = Duration::from_secs(20);

/// A stack of one schedule's own, and the servers the explorer started
/// for it (stopped when dropped).
pub(in crate::explore) struct OwnStack {
    pub(in crate::explore) stack: Stack,
    pub(in crate::explore) redises: Redises,
    _servers: Vec<RedisServer>,
}

/// A stack for one schedule of `variant`'s failover.
pub(in crate::explore) async fn own_stack(variant: Variant) -> anyhow::Result<OwnStack> {
    use crate::replay::{Beside, start, start_failover};
    let (etcd, zookeeper) = match variant {
        Variant::Etcd => (3, 0),
        Variant::ZooKeeper => (0, 3),
        _ => {
            let (gates, stack, url) = start_failover(false).await?;
            let redises = Redises {
                stock: url,
                gates: gates.url(),
                postgres: None,
            };
            return Ok(OwnStack {
                stack,
                redises,
                _servers: vec![gates],
            });
        }
    };
    let beside = Beside {
        etcd,
        zookeeper,
        ..Beside::default()
    };
    let (redis, stack) = start(false, None, beside).await?;
    Ok(OwnStack {
        stack,
        redises: Redises::one(&redis.url()),
        _servers: vec![redis],
    })
}

/// What a schedule's failover acts on, and what it may still strike.
pub(in crate::explore) struct Failing {
    store: Replicated,
    left: u8,
    /// Replication is held back (until the failover).
    held: bool,
    /// Held back only while nobody holds the lock (`failover-wait-early`).
    hold_early: bool,
    /// The buyers `WAIT` for a replica: the new master gets one.
    wait_replicas: bool,
    /// The new master's replica, once started.
    replica: Option<RedisServer>,
}

enum Replicated {
    Redis {
        relay: u32,
        master_pid: u32,
        master: SocketAddr,
        sentinels: Vec<String>,
    },
    /// etcd's members or ZooKeeper's servers, one of them leading.
    Consensus(Variant),
}

impl Failing {
    /// What `stack` (from [`own_stack`]) offers to fail over, with the
    /// model's `bounds`.
    pub(in crate::explore) fn of(
        stack: &Stack,
        variant: Variant,
        stock_url: &str,
        bounds: &crate::check::model::Bounds,
    ) -> anyhow::Result<Failing> {
        let store = match variant {
            Variant::Etcd | Variant::ZooKeeper => Replicated::Consensus(variant),
            _ => Replicated::Redis {
                relay: (stack.relay.as_ref())
                    .context("a failover is explored on stacks of the explorer's own")?
                    .pid,
                master_pid: stack.redis_pid.context("the stack's Redis pid")?,
                master: stock_url.trim_start_matches("redis://").parse()?,
                sentinels: stack.sentinel_addrs(),
            },
        };
        Ok(Failing {
            store,
            left: bounds.failovers,
            held: false,
            hold_early: bounds.hold_early,
            wait_replicas: bounds.wait_replicas,
            replica: None,
        })
    }

    /// What may strike now, `locked` whether anyone holds the lock.
    pub(in crate::explore) fn offered(&self, locked: bool) -> Vec<Choice> {
        match (&self.store, self.left > 0, self.held) {
            (_, false, _) => Vec::new(),
            (Replicated::Consensus(_), true, _) | (Replicated::Redis { .. }, true, true) => {
                vec![Choice::Failover]
            }
            (Replicated::Redis { .. }, true, false) if !self.hold_early || !locked => {
                vec![Choice::HoldReplication]
            }
            _ => Vec::new(),
        }
    }
}

impl Run<'_> {
    /// Strikes a failover's fault on `sku`.
    pub(in crate::explore) async fn fail(
        &mut self,
        fault: &Choice,
        sku: &str,
    ) -> anyhow::Result<()> {
        let failing = self.failing.as_mut().context("a failover cell")?;
        match (fault, &failing.store) {
            (Choice::HoldReplication, Replicated::Redis { relay, .. }) => {
                let mut conn = self.store.conn().await?;
                let acked =
                    crate::store::wait_replicas(&mut conn, 1, Duration::from_secs(5)).await?;
                if acked < 1 {
                    bail!("the replica did not catch up with the master within 5 s");
                }
                crate::up::relay::hold(*relay).await?;
                failing.held = true;
            }
            (
                Choice::Failover,
                Replicated::Redis {
                    relay,
                    master_pid,
                    master,
                    sentinels,
                },
            ) => {
                let pids = (*master_pid, *relay);
                let (promoted, _) =
                    crate::harness::failover::kill_master(pids, sentinels, *master).await?;
                (failing.left, failing.held) = (failing.left - 1, false);
                if failing.wait_replicas {
                    let addr: SocketAddr = promoted.trim_start_matches("redis://").parse()?;
                    let replica = RedisServer::start_replica(addr).await?;
                    crate::up::redis::wait_replicating(&replica.url(), &promoted, SYNC).await?;
                    failing.replica = Some(replica);
                }
                self.store = Store::open(&promoted)?;
                for instance in &self.stack.instances {
                    let client = self.stack.client.at(&instance.url);
                    crate::harness::failover::serving_again(&client, &instance.name, sku).await?;
                }
                self.wake().await?;
            }
            (Choice::Failover, Replicated::Consensus(variant)) => {
                failing.left -= 1;
                let variant = *variant;
                let (_, pid) = match variant {
                    Variant::Etcd => crate::harness::failover::etcd_leader(self.stack).await?,
                    _ => crate::harness::failover::zookeeper_leader(self.stack).await?,
                };
                crate::os::signal(pid, Signal::SIGKILL);
                self.led_again(variant, pid).await?;
            }
            (other, _) => bail!("{other:?} is not this failover's"),
        }
        Ok(())
    }

    /// Waits until a member or server other than `dead` leads.
    async fn led_again(&self, variant: Variant, dead: u32) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            let led = match variant {
                Variant::Etcd => crate::harness::failover::etcd_leader(self.stack).await,
                _ => crate::harness::failover::zookeeper_leader(self.stack).await,
            };
            if led.is_ok_and(|(_, pid)| pid != dead) {
                return Ok(());
            }
            if started.elapsed() > SYNC {
                bail!("no new {variant} leader within {SYNC:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
