//! Each store started and announced on stdout: the replica set, the etcd
//! members, the ZooKeeper servers, the orders' PostgreSQL and our Redis
//! (persistent, plain or locked down).

use std::path::Path;

use crate::up::etcd::EtcdCluster;
use crate::up::postgres::PostgresServer;
use crate::up::redis::RedisServer;
use crate::up::sentinel::ReplicaSet;
use crate::up::zookeeper::ZooKeeperServer;

/// The replica of `master`, its relay and the Sentinels, announced.
pub(super) async fn start_replica_set(
    master: &RedisServer,
    run_dir: &Path,
) -> anyhow::Result<ReplicaSet> {
    let set = ReplicaSet::start(master, run_dir).await?;
    say!(
        "redis replica: pid {} {}",
        set.replica.pid().unwrap_or(0),
        set.replica.url()
    );
    say!(
        "replication relay: pid {} {}",
        set.relay.pid().unwrap_or(0),
        set.relay.listen()
    );
    for (index, sentinel) in set.sentinels.iter().enumerate() {
        say!(
            "sentinel {}: pid {} {}",
            index + 1,
            sentinel.pid().unwrap_or(0),
            sentinel.address()
        );
    }
    Ok(set)
}

/// `members` etcd members with their data in the run directory, announced
/// one per line; none when asked for none or when etcd is not installed.
pub(super) async fn start_etcd(
    members: u16,
    run_dir: &Path,
) -> anyhow::Result<Option<EtcdCluster>> {
    if members == 0 {
        return Ok(None);
    }
    if crate::os::find_program("etcd").is_none() {
        say!("etcd: not installed, none started (install etcd-server, or pass --etcd 0)");
        return Ok(None);
    }
    // A free port may be taken before etcd binds it: try again with others
    // (in a fresh directory: a failed member may have written its own).
    let mut attempt = 1;
    let cluster = loop {
        let dir = run_dir.join(format!("etcd-{attempt}"));
        match EtcdCluster::start(usize::from(members), Some(&dir)).await {
            Ok(cluster) => break cluster,
            Err(err) if attempt < 3 => {
                tracing::warn!("etcd did not start ({err:#}); trying other ports");
                attempt += 1;
            }
            Err(err) => return Err(err),
        }
    };
    for (index, member) in cluster.members.iter().enumerate() {
        say!(
            "etcd member {}: pid {} {}",
            index + 1,
            member.pid().unwrap_or(0),
            member.url()
        );
    }
    Ok(Some(cluster))
}

/// `count` ZooKeeper servers in `run_dir`, announced; none, with a warning,
/// when ZooKeeper is not installed (a lab without it still runs).
pub(super) async fn start_zookeeper(
    count: u16,
    run_dir: &Path,
) -> anyhow::Result<Vec<ZooKeeperServer>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if let Err(missing) = crate::up::zookeeper::require_zookeeper() {
        say!("zookeeper: not started (--zookeeper 0 silences this): {missing:#}");
        return Ok(Vec::new());
    }
    let servers = ZooKeeperServer::start_ensemble(usize::from(count), run_dir).await?;
    for server in &servers {
        say!(
            "zookeeper {}: pid {} {}",
            server.id(),
            server.pid().unwrap_or(0),
            server.address()
        );
    }
    Ok(servers)
}

/// A PostgreSQL server for the orders, in the run directory, announced;
/// none, with a warning, when PostgreSQL is not installed (the stack then
/// runs without orders).
pub(super) async fn start_postgres(run_dir: &Path) -> anyhow::Result<Option<PostgresServer>> {
    if !crate::up::postgres::installed() {
        say!(
            "postgres: not installed, orders off (install postgresql, or pass --orders off to silence this)"
        );
        return Ok(None);
    }
    let server = PostgresServer::start(Some(run_dir)).await?;
    tracing::info!(
        "postgres: initdb took {:?}, the server answered {:?} after its start",
        server.timings.initdb,
        server.timings.start
    );
    say!(
        "postgres: pid {} {}",
        server.pid().unwrap_or(0),
        server.url()
    );
    Ok(Some(server))
}

/// How many times our Redis is started again, at most, after it exited.
pub(super) const REDIS_STARTS: u32 = 5;

/// A redis-server on `port` (a free one when `None`): persistent in `dir`
/// (`--persist`), or keeping nothing; without `chaos`, locked down (no
/// DEBUG, no CONFIG for its clients).
pub(super) async fn start_redis(
    port: Option<u16>,
    dir: Option<&Path>,
    chaos: bool,
) -> anyhow::Result<RedisServer> {
    if !chaos {
        return RedisServer::start_locked_down(port, dir).await;
    }
    match dir {
        Some(dir) => RedisServer::start_persistent(port, dir).await,
        None => RedisServer::start(port).await,
    }
}

/// `redis: pid N URL`, and where it persists when it does.
pub(super) fn announce_redis(server: &RedisServer) {
    match server.persistent_dir() {
        Some(dir) => say!(
            "redis: pid {} {} (persistent: append-only file, fsync always, in {})",
            server.pid().unwrap_or(0),
            server.url(),
            dir.display()
        ),
        None => say!("redis: pid {} {}", server.pid().unwrap_or(0), server.url()),
    }
}
