//! The ZooKeeper lock library against real ZooKeeper servers (Debian's
//! `zookeeper` package, a JVM each), without HTTP: the servers themselves
//! (one, and an ensemble of three), mutual exclusion of sessions, a waiter
//! woken by the release, a holder's closed or expired session freeing the
//! lock, fencing tokens that grow. Every server is stopped by pid at the
//! end of its test (and killed when a failed test drops it).
//!
//! This file: the fixtures and the servers; `lock/`: the lock;
//! `release.rs`: a release lost in flight; `sessions.rs`: sessions opened
//! with ZooKeeper unreachable (through an instance).

mod lock;
mod release;
mod sessions;

use std::time::{Duration, Instant};

use stocklock::lock::ZooKeeperSession;
use stocklock::up::zookeeper::{ZooKeeperServer, connect_string, require_zookeeper};
use tempfile::TempDir;

use crate::helpers;

/// ZooKeeper servers started for one test, in their own directory.
pub(crate) struct Servers {
    pub(crate) servers: Vec<ZooKeeperServer>,
    /// Holds the servers' directories; removed after them.
    _dir: TempDir,
}

impl Servers {
    /// `count` servers (1: standalone; more: an ensemble), or `None`, with a
    /// visible SKIPPED (a failure under CI=true), when ZooKeeper is missing.
    pub(crate) async fn start(count: usize) -> Option<Servers> {
        if let Err(missing) = require_zookeeper() {
            helpers::missing_tool(&format!("zookeeper: {missing:#}"));
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("stocklock-zk-test-")
            .tempdir()
            .unwrap();
        let servers = ZooKeeperServer::start_ensemble(count, dir.path())
            .await
            .expect("start zookeeper");
        Some(Servers { servers, _dir: dir })
    }

    pub(crate) fn connect_string(&self) -> String {
        connect_string(&self.servers)
    }

    /// A session with `timeout` as its lease.
    pub(crate) async fn session(&self, timeout: Duration) -> ZooKeeperSession {
        ZooKeeperSession::connect(&self.connect_string(), timeout, Duration::from_secs(10))
            .await
            .expect("connect to zookeeper")
    }

    /// Stops every server (those a test stopped already too) and checks
    /// each process is gone.
    pub(crate) async fn stop(mut self) {
        for server in self.servers.iter_mut() {
            let pid = server.pid();
            server.stop().await;
            if let Some(pid) = pid {
                assert!(!helpers::alive(pid), "zookeeper pid {pid} still runs");
            }
        }
    }
}

#[tokio::test]
async fn a_standalone_server_serves_within_seconds() {
    let started = Instant::now();
    let Some(servers) = Servers::start(1).await else {
        return;
    };
    let ready = started.elapsed();
    eprintln!("zookeeper: one standalone server served after {ready:?} (JVM start included)");
    assert_eq!(
        servers.servers[0].mode().await.as_deref(),
        Some("standalone")
    );
    let session = servers.session(Duration::from_secs(2)).await;
    assert!(!session.may_be_lost());
    assert!(
        session.session_timeout() <= Duration::from_secs(2),
        "the server granted {:?}",
        session.session_timeout()
    );
    drop(session);
    servers.stop().await;
}

#[tokio::test]
async fn an_ensemble_of_three_elects_one_leader() {
    let started = Instant::now();
    let Some(servers) = Servers::start(3).await else {
        return;
    };
    eprintln!(
        "zookeeper: an ensemble of three served after {:?}",
        started.elapsed()
    );
    let mut modes = Vec::new();
    for server in &servers.servers {
        modes.push(server.mode().await.unwrap_or_default());
    }
    modes.sort();
    assert_eq!(modes, ["follower", "follower", "leader"]);
    // A client given all three reaches the ensemble and locks through it.
    let session = servers.session(Duration::from_secs(2)).await;
    let lock = session.lock("ensemble").unwrap();
    let hold = lock.lock(Duration::ZERO).await.unwrap().expect("free");
    assert!(lock.unlock(&hold).await.unwrap());
    drop(session);
    servers.stop().await;
}

/// `up --zookeeper 3` runs an ensemble beside the stack, says where, and
/// stops it with everything else (the fixture's stop checks every pid).
#[tokio::test]
async fn up_runs_an_ensemble_and_stops_it() {
    if let Err(missing) = require_zookeeper() {
        helpers::missing_tool(&format!("zookeeper: {missing:#}"));
        return;
    }
    let stack = helpers::Stack::start_with(1, None, &["--zookeeper", "3", "--redlock", "0"]).await;
    assert_eq!(stack.zookeeper.len(), 3, "three servers announced");
    let mut modes = Vec::new();
    for server in &stack.zookeeper {
        assert!(helpers::alive(server.pid));
        let port = server.url.rsplit(':').next().unwrap().parse().unwrap();
        let answer = stocklock::up::zookeeper::four_letter_word(port, "srvr")
            .await
            .unwrap();
        let mode = answer.lines().find_map(|l| l.strip_prefix("Mode: "));
        modes.push(mode.unwrap_or_default().to_owned());
    }
    modes.sort();
    assert_eq!(modes, ["follower", "follower", "leader"]);
    stack.stop().await;
}

/// The leader of the ensemble dies under a holder: a new leader is elected,
/// the holder's session (and so its znode) lives on, nobody else gets the
/// lock meanwhile, and the next holder's token is in the new epoch (the
/// high 32 bits of a zxid).
#[tokio::test]
async fn a_lock_outlives_the_leaders_death() {
    let Some(mut servers) = Servers::start(3).await else {
        return;
    };
    let holder = servers.session(Duration::from_secs(10)).await;
    let waiter = servers.session(Duration::from_secs(10)).await;
    let lock = holder.lock("failover").unwrap();
    let held = lock.lock(Duration::ZERO).await.unwrap().expect("free");

    let mut leader = None;
    for (index, server) in servers.servers.iter().enumerate() {
        if server.mode().await.as_deref() == Some("leader") {
            leader = Some(index);
        }
    }
    let leader = leader.expect("one leader");
    let killed = servers.servers[leader].pid().unwrap();
    stocklock::os::signal(killed, nix::sys::signal::Signal::SIGKILL);
    servers.servers[leader].stop().await; // reaps it

    // While the others elect a new leader a request may fail with a lost
    // connection; the waiter tries again until the ensemble answers (20 s).
    let waiting = waiter.lock("failover").unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let attempt = loop {
        match waiting.lock(Duration::from_millis(1500)).await {
            Ok(attempt) => break attempt,
            Err(err) if Instant::now() < deadline => eprintln!("during the election: {err}"),
            Err(err) => panic!("the ensemble did not answer within 20 s: {err}"),
        }
    };
    assert_eq!(
        attempt, None,
        "the lock was granted twice across the failover"
    );
    assert!(
        lock.unlock(&held).await.unwrap(),
        "the holder's znode survived the leader's death"
    );
    let next = waiting
        .lock(Duration::ZERO)
        .await
        .unwrap()
        .expect("released");
    assert!(
        next.token >> 32 > held.token >> 32,
        "a new epoch: {:#x} after {:#x}",
        next.token,
        held.token
    );
    drop((holder, waiter));
    servers.stop().await;
}
