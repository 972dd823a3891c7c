//! The stack's stores: the main Redis (one server, the user's, or a
//! cluster; with `--replica`, its replica, relay and Sentinels), Redlock's
//! nodes, the etcd cluster, the ZooKeeper servers and the orders'
//! PostgreSQL; each started, announced on stdout and stopped.

mod start;

use std::path::{Path, PathBuf};

use super::etcd::EtcdCluster;
use super::postgres::PostgresServer;
use super::redis::RedisServer;
use super::sentinel::ReplicaSet;
use super::zookeeper::ZooKeeperServer;
use super::{CLUSTER_MASTERS, UpConfig};
use crate::store::Store;
use start::{
    REDIS_STARTS, announce_redis, start_etcd, start_postgres, start_redis, start_replica_set,
    start_zookeeper,
};

/// The stack's Redis servers: a cluster, or one Redis (ours, supervised
/// and restarted; or the user's); and Redlock's nodes.
pub(super) struct Stores {
    /// The Redis `up` started and restarts (`None`: the user's, or a cluster).
    pub(super) redis: Option<RedisServer>,
    /// With `--persist`, where our Redis keeps its files, across restarts.
    persist_dir: Option<PathBuf>,
    /// Chaos mode: our Redis keeps DEBUG and CONFIG (across restarts too).
    chaos: bool,
    /// What the instances are given as `--redis-url`.
    pub(super) redis_url: String,
    /// `--replica`: the replica, its relay and the Sentinels; our Redis is
    /// then not restarted when it dies (the Sentinels fail over instead).
    replica_set: Option<ReplicaSet>,
    cluster: Vec<RedisServer>,
    /// Redlock's nodes: independent, unsupervised (a node that dies stays
    /// down, which is what the lab's Redlock scenarios are about).
    redlock: Vec<RedisServer>,
    /// The etcd cluster (`--etcd N`), unsupervised like Redlock's nodes.
    etcd: Option<EtcdCluster>,
    /// ZooKeeper's servers (one, or an ensemble), unsupervised like
    /// Redlock's nodes: a server that dies stays down.
    zookeeper: Vec<ZooKeeperServer>,
    /// The PostgreSQL `up` started for the orders (`None`: the user's, or
    /// orders off), restarted on its port with its data when it exits.
    postgres: Option<PostgresServer>,
    /// Our PostgreSQL could not be restarted: it stays down, unwatched.
    postgres_given_up: bool,
    /// What the instances are given as `--postgres-url` (`None`: orders off).
    pub(super) postgres_url: Option<String>,
}

/// Which of the servers `up` restarts exited, and how.
pub(super) enum Exited {
    Redis(std::io::Result<std::process::ExitStatus>),
    Postgres(std::io::Result<std::process::ExitStatus>),
}

impl Stores {
    /// Starts what `config` asks for, announcing each server.
    pub(super) async fn start(config: &UpConfig, run_dir: &Path) -> anyhow::Result<Stores> {
        let mut cluster = Vec::new();
        if config.cluster {
            cluster = futures_util::future::try_join_all(
                (0..CLUSTER_MASTERS).map(|_| RedisServer::start_cluster_node()),
            )
            .await?;
            super::redis::create_cluster(&cluster).await?;
            let pids: Vec<String> = cluster
                .iter()
                .map(|n| n.pid().unwrap_or(0).to_string())
                .collect();
            let urls: Vec<String> = cluster.iter().map(RedisServer::url).collect();
            say!("redis cluster: pids {} {}", pids.join(","), urls.join(","));
        }
        let persist_dir = config.persist.then(|| run_dir.join("redis-data"));
        let redis = match &config.redis_url {
            Some(_) => None,
            None if config.cluster => None,
            None => Some(
                start_redis(config.redis_port, persist_dir.as_deref(), !config.no_chaos).await?,
            ),
        };
        let redis_url = match (&config.redis_url, &redis) {
            (Some(url), _) => url.clone(),
            (None, Some(server)) => {
                announce_redis(server);
                server.url()
            }
            (None, None) => cluster.first().map(RedisServer::url).unwrap_or_default(),
        };
        let replica_set = match (&redis, config.replica) {
            (Some(master), true) => Some(start_replica_set(master, run_dir).await?),
            _ => None,
        };
        let redlock = futures_util::future::try_join_all(
            (0..config.redlock).map(|_| RedisServer::start(None)),
        )
        .await?;
        for (index, node) in redlock.iter().enumerate() {
            say!(
                "redlock node {}: pid {} {}",
                index + 1,
                node.pid().unwrap_or(0),
                node.url()
            );
        }
        let etcd = start_etcd(config.etcd, run_dir).await?;
        let zookeeper = start_zookeeper(config.zookeeper, run_dir).await?;
        let postgres = match (config.orders.is_on(), &config.postgres_url) {
            (true, None) => start_postgres(run_dir).await?,
            _ => None,
        };
        let postgres_url = match (config.orders.is_on(), &config.postgres_url) {
            (true, Some(url)) => Some(url.clone()),
            (true, None) => postgres.as_ref().map(PostgresServer::url),
            (false, Some(_)) => {
                tracing::warn!("--orders off: the PostgreSQL of --postgres-url is not used");
                None
            }
            (false, None) => None,
        };
        Ok(Stores {
            redis,
            persist_dir,
            chaos: !config.no_chaos,
            redis_url,
            replica_set,
            cluster,
            redlock,
            etcd,
            zookeeper,
            postgres,
            postgres_given_up: false,
            postgres_url,
        })
    }

    pub(super) fn cluster_urls(&self) -> Vec<String> {
        self.cluster.iter().map(RedisServer::url).collect()
    }

    pub(super) fn redlock_urls(&self) -> Vec<String> {
        self.redlock.iter().map(RedisServer::url).collect()
    }

    /// The lock stores the instances are given.
    pub(super) fn lock_stores(&self) -> crate::lock::LockStoresConfig {
        crate::lock::LockStoresConfig {
            redlock_nodes: self.redlock_urls(),
            etcd_endpoints: self
                .etcd
                .as_ref()
                .map(|etcd| etcd.members.iter().map(|m| m.url()).collect())
                .unwrap_or_default(),
            zookeeper: (!self.zookeeper.is_empty()).then(|| {
                let servers: Vec<String> = self
                    .zookeeper
                    .iter()
                    .map(|s| s.address().to_string())
                    .collect();
                servers.join(",")
            }),
        }
    }

    /// The Sentinels' `127.0.0.1:PORT` under `--replica` (else none): the
    /// instances find the master through them.
    pub(super) fn sentinel_addrs(&self) -> Vec<String> {
        self.replica_set
            .as_ref()
            .map(ReplicaSet::addresses)
            .unwrap_or_default()
    }

    /// Whether `up` restarts our Redis when it dies (not under `--replica`:
    /// the Sentinels fail over to the replica instead).
    pub(super) fn restarts_redis(&self) -> bool {
        self.redis.is_some() && self.replica_set.is_none()
    }

    /// The store the instances sell from.
    pub(super) fn store(&self) -> anyhow::Result<Store> {
        Ok(crate::store::open_either(
            &self.redis_url,
            &self.cluster_urls(),
        )?)
    }

    /// Resolves when our Redis (never without one, nor under `--replica`:
    /// nothing restarts it; it is reaped when `up` stops) or our
    /// PostgreSQL (never without one, nor once its restart failed) exits.
    pub(super) async fn exited(&mut self) -> Exited {
        let watch_redis = self.replica_set.is_none();
        let watch_postgres = !self.postgres_given_up;
        let (redis, postgres) = (&mut self.redis, &mut self.postgres);
        let redis = async {
            match redis.as_mut() {
                Some(server) if watch_redis => server.exited().await,
                _ => std::future::pending().await,
            }
        };
        let postgres = async {
            match postgres.as_mut() {
                Some(server) if watch_postgres => server.exited().await,
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            status = redis => Exited::Redis(status),
            status = postgres => Exited::Postgres(status),
        }
    }

    /// Starts our Redis again on its port, as a managed Redis would be:
    /// empty, or with every acknowledged write under `--persist`.
    ///
    /// A server shut down again before it was ready (a second chaos restart
    /// while it loads its append-only file) is started again: a few tries,
    /// rather than the whole stack stopping with it.
    pub(super) async fn restart_redis(&mut self) -> anyhow::Result<()> {
        let Some(old) = self.redis.take() else {
            return Ok(());
        };
        let mut attempt = 1;
        let server = loop {
            match start_redis(Some(old.port()), self.persist_dir.as_deref(), self.chaos).await {
                Ok(server) => break server,
                Err(err) if attempt < REDIS_STARTS => {
                    tracing::warn!("redis-server did not restart (attempt {attempt}): {err:#}");
                    attempt += 1;
                }
                Err(err) => return Err(err),
            }
        };
        announce_redis(&server);
        self.redis = Some(server);
        Ok(())
    }

    /// Starts our PostgreSQL again on its port, with its data (every
    /// committed order kept), as a managed database would be; the workers
    /// reconnect and write the orders that waited in the streams. A few
    /// tries: the backends of a killed server take a moment to leave.
    pub(super) async fn restart_postgres(&mut self) {
        let Some(server) = self.postgres.as_mut() else {
            return;
        };
        for attempt in 1..=3 {
            match server.restart().await {
                Ok(()) => {
                    say!(
                        "postgres: pid {} {}",
                        server.pid().unwrap_or(0),
                        server.url()
                    );
                    return;
                }
                Err(err) => {
                    tracing::warn!("postgres did not restart (attempt {attempt}): {err:#}");
                    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                }
            }
        }
        tracing::error!("postgres stays down: it did not restart");
        self.postgres_given_up = true;
    }

    pub(super) async fn stop(&mut self) {
        if let Some(set) = self.replica_set.as_mut() {
            set.stop().await;
        }
        if let Some(server) = self.redis.as_mut() {
            server.stop().await;
        }
        for node in self.cluster.iter_mut().chain(self.redlock.iter_mut()) {
            node.stop().await;
        }
        if let Some(etcd) = self.etcd.as_mut() {
            etcd.stop().await;
        }
        for server in self.zookeeper.iter_mut() {
            server.stop().await;
        }
        if let Some(server) = self.postgres.as_mut() {
            server.stop().await;
        }
    }
}
