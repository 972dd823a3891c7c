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
/// stack has no such store. The clock starts once the client is connected
/// (a session opened, a lease granted: what one pair does not pay), and at
/// least one pair is counted however long it takes: a store slower than
/// `period` measures slow, never 0 pairs a second.
pub async fn pairs_per_second(
    store: PairStore,
    stores: &Stores,
    period: Duration,
) -> anyhow::Result<Option<f64>> {
    let owner = OwnerId::new("compare");
    let key = format!("compare-pairs:{}", store.name());
    let mut window = Window::new(period);
    match store {
        PairStore::Redis => {
            let conn = Store::open(&stores.redis_url)?.conn().await?;
            let lock = LeaseLock::new(conn, key, Wakeups::new());
            while window.more() {
                anyhow::ensure!(
                    lock.try_lock(&owner, LEASE).await?,
                    "the redis lock was held"
                );
                lock.unlock(&owner).await?;
                window.pairs += 1;
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
            while window.more() {
                anyhow::ensure!(
                    lock.try_lock(&owner, LEASE).await?,
                    "the redis lock was held"
                );
                if wait_replicas(&mut conn, 1, REPLICA_WAIT).await? < 1 {
                    unacked += 1;
                }
                lock.unlock(&owner).await?;
                window.pairs += 1;
            }
            if unacked > 0 {
                eprintln!(
                    "compare: redis+wait: the replica did not acknowledge {unacked} of {} locks within {} ms",
                    window.pairs,
                    REPLICA_WAIT.as_millis()
                );
            }
        }
        PairStore::Redlock => {
            if stores.redlock.is_empty() {
                return Ok(None);
            }
            let lock = RedlockNodes::open(&stores.redlock)?.lock(key);
            while window.more() {
                let granted = lock.lock(&owner, LEASE, Duration::ZERO).await?;
                anyhow::ensure!(granted.is_ok(), "the redlock was not granted: {granted:?}");
                lock.unlock(&owner).await;
                window.pairs += 1;
            }
        }
        PairStore::Etcd => {
            if stores.etcd.is_empty() {
                return Ok(None);
            }
            let client = EtcdClient::new(stores.etcd.clone())?;
            let session = Session::grant(&client, LEASE).await?;
            let lock = EtcdLock::new(client, &key);
            while window.more() {
                let held = lock.lock(&session, Duration::ZERO).await?;
                lock.unlock(&held).await?;
                window.pairs += 1;
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
            while window.more() {
                let hold = lock
                    .lock(Duration::ZERO)
                    .await?
                    .context("the zookeeper lock was held")?;
                lock.unlock(&hold).await?;
                window.pairs += 1;
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
            while window.more() {
                let tx = client.transaction().await?;
                let got: bool = tx
                    .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&key])
                    .await?
                    .try_get(0)?;
                anyhow::ensure!(got, "the advisory lock was held");
                tx.commit().await?;
                window.pairs += 1;
            }
        }
    }
    Ok(Some(window.rate()))
}

/// The pairs counted, from when the first began.
struct Window {
    period: Duration,
    started: Option<Instant>,
    pairs: u64,
}

impl Window {
    fn new(period: Duration) -> Self {
        Window {
            period,
            started: None,
            pairs: 0,
        }
    }

    /// Whether to play another pair: the first starts the clock, and the
    /// window closes once it has one pair and its period has passed.
    fn more(&mut self) -> bool {
        let started = *self.started.get_or_insert_with(Instant::now);
        self.pairs == 0 || started.elapsed() < self.period
    }

    fn rate(&self) -> f64 {
        let elapsed = self.started.map_or(Duration::ZERO, |s| s.elapsed());
        self.pairs as f64 / elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
    }
}
