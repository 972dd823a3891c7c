//! Uncontended lock pairs: one client takes and releases a free lock as
//! fast as it can, for a while, on each store. What one lock costs with
//! nobody in the way: the round trips to the store and, for the CP stores,
//! the consensus (a majority of the members write each change to disk).

use std::time::{Duration, Instant};

use anyhow::Context;

use crate::knobs::REPLICA_WAIT;
use crate::lock::etcd::{EtcdClient, EtcdLock, Session};
use crate::lock::{LeaseLock, OwnerId, RedlockNodes, Wakeups, ZooKeeperSession};
use crate::store::{Store, wait_replicas};

/// The lease of every pair: long enough never to run out during one.
const LEASE: Duration = Duration::from_secs(30);

/// Where each store of a stack is.
#[derive(Clone, Debug, Default)]
pub struct Stores {
    pub redis_url: String,
    pub redlock: Vec<String>,
    pub etcd: Vec<String>,
    pub zookeeper: Option<String>,
    /// The main Redis has a replica (`up --replica`).
    pub replica: bool,
    /// The stack's PostgreSQL, for `pg-advisory`'s lock.
    pub postgres: Option<String>,
}

/// One store's lock and release, again and again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairStore {
    Redis,
    /// The Redis lock, then `WAIT 1 100` for the replica to have it.
    RedisWait,
    Redlock,
    Etcd,
    ZooKeeper,
    /// PostgreSQL's advisory lock, held by a transaction (`pg-advisory`).
    Postgres,
}

impl PairStore {
    pub const ALL: [PairStore; 6] = [
        PairStore::Redis,
        PairStore::RedisWait,
        PairStore::Redlock,
        PairStore::Etcd,
        PairStore::ZooKeeper,
        PairStore::Postgres,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PairStore::Redis => "redis",
            PairStore::RedisWait => "redis+wait",
            PairStore::Redlock => "redlock",
            PairStore::Etcd => "etcd",
            PairStore::ZooKeeper => "zookeeper",
            PairStore::Postgres => "postgres",
        }
    }
}

/// Lock/unlock pairs per second on `store` over `period`; `None` when the
/// stack has no such store.
pub async fn pairs_per_second(
    store: PairStore,
    stores: &Stores,
    period: Duration,
) -> anyhow::Result<Option<f64>> {
    let owner = OwnerId::new("compare");
    let key = format!("compare-pairs:{}", store.name());
    let started = Instant::now();
    let mut pairs = 0u64;
    match store {
        PairStore::Redis => {
            let conn = Store::open(&stores.redis_url)?.conn().await?;
            let lock = LeaseLock::new(conn, key, Wakeups::new());
            while started.elapsed() < period {
                anyhow::ensure!(
                    lock.try_lock(&owner, LEASE).await?,
                    "the redis lock was held"
                );
                lock.unlock(&owner).await?;
                pairs += 1;
            }
        }
        PairStore::RedisWait => {
            if !stores.replica {
                return Ok(None);
            }
            let mut conn = Store::open(&stores.redis_url)?.conn().await?;
            let lock = LeaseLock::new(conn.clone(), key, Wakeups::new());
            // A WAIT that times out costs its pair the whole wait: the pair
            // counts (a sale would have answered `not_replicated`), and the
            // count of them is printed.
            let mut unacked = 0u64;
            while started.elapsed() < period {
                anyhow::ensure!(
                    lock.try_lock(&owner, LEASE).await?,
                    "the redis lock was held"
                );
                if wait_replicas(&mut conn, 1, REPLICA_WAIT).await? < 1 {
                    unacked += 1;
                }
                lock.unlock(&owner).await?;
                pairs += 1;
            }
            if unacked > 0 {
                eprintln!(
                    "compare: redis+wait: the replica did not acknowledge {unacked} of {pairs} locks within {} ms",
                    REPLICA_WAIT.as_millis()
                );
            }
        }
        PairStore::Redlock => {
            if stores.redlock.is_empty() {
                return Ok(None);
            }
            let lock = RedlockNodes::open(&stores.redlock)?.lock(key);
            while started.elapsed() < period {
                let granted = lock.lock(&owner, LEASE, Duration::ZERO).await?;
                anyhow::ensure!(granted.is_ok(), "the redlock was not granted: {granted:?}");
                lock.unlock(&owner).await;
                pairs += 1;
            }
        }
        PairStore::Etcd => {
            if stores.etcd.is_empty() {
                return Ok(None);
            }
            let client = EtcdClient::new(stores.etcd.clone())?;
            let session = Session::grant(&client, LEASE).await?;
            let lock = EtcdLock::new(client, &key);
            while started.elapsed() < period {
                let held = lock.lock(&session, Duration::ZERO).await?;
                lock.unlock(&held).await?;
                pairs += 1;
            }
            session.revoke().await?;
        }
        PairStore::ZooKeeper => {
            let Some(connect) = &stores.zookeeper else {
                return Ok(None);
            };
            let session =
                ZooKeeperSession::connect(connect, LEASE, Duration::from_secs(10)).await?;
            let lock = session.lock(&key.replace(':', "-"))?;
            while started.elapsed() < period {
                let hold = lock
                    .lock(Duration::ZERO)
                    .await?
                    .context("the zookeeper lock was held")?;
                lock.unlock(&hold).await?;
                pairs += 1;
            }
        }
        PairStore::Postgres => {
            let Some(url) = &stores.postgres else {
                return Ok(None);
            };
            // As pg-advisory takes it: the transaction's lock on a key,
            // released by the commit (three round trips a pair).
            let mut client = crate::orders::connect(url).await?;
            let key = 0x636f_6d70_i64; // "comp"
            while started.elapsed() < period {
                let tx = client.transaction().await?;
                let got: bool = tx
                    .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&key])
                    .await?
                    .try_get(0)?;
                anyhow::ensure!(got, "the advisory lock was held");
                tx.commit().await?;
                pairs += 1;
            }
        }
    }
    Ok(Some(pairs as f64 / started.elapsed().as_secs_f64()))
}
