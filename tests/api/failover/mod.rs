//! A real Redis failover, started by the real `stocklock up --replica`: the
//! main Redis, its replica replicating through the relay process, and
//! three Sentinels. A lock the master granted but never replicated is lost
//! when Sentinel promotes the replica (made deterministic by SIGSTOPping
//! the relay and waiting until the kernel says it is stopped: the SET's
//! bytes never reach the replica), a lock `WAIT`
//! confirmed on the replica survives, and the instances follow the new
//! master without a restart. Every wait is on an event (the Sentinels'
//! answer, the replica's data), bounded by a deadline.
//!
//! This file: the fixtures, the processes and the lock at the Redis level;
//! `instances.rs`: the instances through nginx across the failover.

mod instances;

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use redis::aio::MultiplexedConnection;
use stocklock::os::signal;
use stocklock::store::wait_replicas;
use stocklock::up::relay::hold;
use stocklock::up::sentinel::{MASTER_NAME, master_addr, wait_new_master};

use crate::helpers::note;
use crate::helpers::{self, Stack, alive};

/// Each test's own bound: it fails rather than hangs.
const BOUND: Duration = Duration::from_secs(180);
/// How long a failover may take, from the kill to a new master that
/// answers as one (it takes a few seconds: 1 s to call the master down,
/// then the Sentinels' vote and the promotion).
const FAILOVER_WITHIN: Duration = Duration::from_secs(60);

async fn bounded<T>(body: impl Future<Output = T>) -> T {
    crate::helpers::within(BOUND, body).await
}

/// `stocklock up --replica` with `instances` instances and no other
/// stores; `None` (SKIPPED, a failure under CI=true) without redis-sentinel.
async fn replica_stack(instances: u16) -> Option<Stack> {
    if stocklock::os::find_program("redis-sentinel").is_none() {
        helpers::missing_tool("redis-sentinel is not installed (scripts/deps.sh redis-sentinel)");
        return None;
    }
    let stack = Stack::start_with(instances, None, &["--replica", "--redlock", "0"]).await;
    assert!(stack.replica.is_some(), "up announced no replica");
    assert!(stack.relay.is_some(), "up announced no relay");
    assert_eq!(
        stack.sentinels.len(),
        3,
        "up announced {:?}",
        stack.sentinels
    );
    Some(stack)
}

/// A plain connection (no reconnection, no re-resolution) to `url`.
async fn plain(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|err| panic!("{url}: {err}"))
}

/// The master's address as the stack announced it.
fn master_of(stack: &Stack) -> SocketAddr {
    let url = stack.redis_url.as_deref().expect("up announced its Redis");
    url.trim_start_matches("redis://")
        .parse()
        .unwrap_or_else(|err| panic!("{url}: {err}"))
}

/// SIGKILLs the master and the relay (any bytes it held back die with
/// it), waits until the Sentinels name the replica master and it answers
/// as one; the new master's URL, and how long that took from the kill.
async fn kill_master_and_fail_over(stack: &Stack) -> (String, Duration) {
    let old = master_of(stack);
    let killed = Instant::now();
    signal(stack.redis_pid.expect("up's Redis pid"), Signal::SIGKILL);
    signal(stack.relay.as_ref().expect("relay").pid, Signal::SIGKILL);
    let new = wait_new_master(&stack.sentinel_addrs(), MASTER_NAME, old, FAILOVER_WITHIN)
        .await
        .unwrap_or_else(|err| panic!("{err:#}"));
    let took = killed.elapsed();
    assert_eq!(
        Some(&new),
        stack.replica.as_ref().map(|r| &r.url),
        "the Sentinels promoted something else than the replica"
    );
    (new, took)
}

/// `SET key value NX PX 30000`: whether it was set.
async fn set_nx(conn: &mut MultiplexedConnection, key: &str, value: &str) -> bool {
    let answer: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .arg("NX")
        .arg("PX")
        .arg(30_000)
        .query_async(conn)
        .await
        .unwrap();
    answer.as_deref() == Some("OK")
}

#[tokio::test]
async fn up_replica_starts_a_replica_a_relay_and_three_sentinels_and_stops_them() {
    bounded(async {
        let Some(stack) = replica_stack(1).await else {
            return;
        };
        let replica = stack.replica.clone().unwrap();
        let relay = stack.relay.clone().unwrap();
        let mut pids = vec![replica.pid, relay.pid];
        pids.extend(stack.sentinels.iter().map(|s| s.pid));
        for pid in &pids {
            assert!(alive(*pid), "pid {pid} announced but not running");
        }
        // Every Sentinel names the master up started.
        assert_eq!(
            master_addr(&stack.sentinel_addrs(), MASTER_NAME)
                .await
                .unwrap(),
            master_of(&stack)
        );
        // The replica replicates through the relay, and tells the master
        // its own port (Sentinel reaches it directly).
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut plain(&replica.url).await)
            .await
            .unwrap();
        assert!(info.contains("role:slave"), "{info}");
        assert!(
            info.contains(&format!("master_port:{}", relay.port().unwrap())),
            "the replica does not replicate through the relay: {info}"
        );
        let url = stack.redis_url.clone().unwrap();
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut plain(&url).await)
            .await
            .unwrap();
        assert!(
            info.contains(&format!("port={},", replica.port().unwrap())),
            "the master does not see the replica's own port: {info}"
        );
        stack.stop().await; // checks every pid above is gone
    })
    .await;
}

/// Takes `lock:{x}` on the master with replication held back or not,
/// asks `WAIT 1 wait_ms`, kills the master, waits for the failover, and
/// tries the same lock on the new master. (acknowledged replicas, second
/// owner got it, value of the key on the new master)
async fn lock_across_a_failover(hold_back: bool, wait_ms: u64) -> Option<(i64, bool, String)> {
    let stack = replica_stack(1).await?;
    let relay = stack.relay.clone().unwrap();
    let mut master = plain(stack.redis_url.as_deref().unwrap()).await;
    if hold_back {
        hold(relay.pid).await.unwrap();
    }
    assert!(
        set_nx(&mut master, "lock:{x}", "ownerA").await,
        "owner A did not get the free lock"
    );
    let acknowledged = wait_replicas(&mut master, 1, Duration::from_millis(wait_ms))
        .await
        .unwrap();
    let (new, took) = kill_master_and_fail_over(&stack).await;
    note(&format!(
        "failover (relay {}): master SIGKILLed to the replica named and answering as master: {} ms",
        if hold_back { "held" } else { "flowing" },
        took.as_millis()
    ));
    let mut promoted = plain(&new).await;
    let second = set_nx(&mut promoted, "lock:{x}", "ownerB").await;
    let value: String = redis::cmd("GET")
        .arg("lock:{x}")
        .query_async(&mut promoted)
        .await
        .unwrap();
    stack.stop().await;
    Some((acknowledged, second, value))
}

#[tokio::test]
async fn a_lock_the_replica_never_received_is_lost_in_the_failover() {
    bounded(async {
        let Some((acknowledged, second, value)) = lock_across_a_failover(true, 200).await else {
            return;
        };
        assert_eq!(
            acknowledged, 0,
            "WAIT saw a replica while the relay was held"
        );
        assert!(second, "owner B did not get the lock on the new master");
        assert_eq!(value, "ownerB", "two owners: A on the dead master, B now");
    })
    .await;
}

#[tokio::test]
async fn a_lock_wait_confirmed_on_the_replica_survives_the_failover() {
    bounded(async {
        let Some((acknowledged, second, value)) = lock_across_a_failover(false, 1000).await else {
            return;
        };
        assert_eq!(acknowledged, 1, "WAIT 1 1000 with replication flowing");
        assert!(!second, "owner B got a lock the replica had received");
        assert_eq!(value, "ownerA");
    })
    .await;
}

/// A replica `wait_replicating` says is replicating is one its master's
/// `WAIT` counts, at once: a buyer's `WAIT` (100 ms) right after a replay
/// or an exploration started the new master's replica must see it. In a
/// replay of `token` in `failover-wait` (the whole stack, three
/// instances), the new master answered `WAIT` 0 for up to half a second
/// after its new replica's link was up, and the replay failed in about
/// half its runs (the suite's replay test among them). This test, with
/// one instance, did not meet that window before the fix (three runs
/// passed): it holds `wait_replicating` to its word after a failover.
#[tokio::test]
async fn a_replica_said_to_replicate_is_counted_by_its_masters_wait_at_once() {
    use stocklock::up::redis::{RedisServer, wait_replicating};
    let Some(stack) = replica_stack(1).await else {
        return;
    };
    bounded(async {
        let (promoted, _) = kill_master_and_fail_over(&stack).await;
        let at: SocketAddr = promoted.trim_start_matches("redis://").parse().unwrap();
        let mut conn = plain(&promoted).await;
        for round in 0..3 {
            let replica = RedisServer::start_replica(at).await.unwrap();
            wait_replicating(&replica.url(), &promoted, Duration::from_secs(20))
                .await
                .unwrap();
            let _: () = redis::cmd("SET")
                .arg("written")
                .arg(round)
                .query_async(&mut conn)
                .await
                .unwrap();
            let acked = wait_replicas(&mut conn, 1, stocklock::knobs::REPLICA_WAIT)
                .await
                .unwrap();
            assert_eq!(
                acked, 1,
                "round {round}: the new master's WAIT did not count its new replica"
            );
        }
    })
    .await;
    stack.stop().await;
}
