//! Redlock with nodes down or slow: two of five down, it still works and
//! still excludes; three down, nobody gets it until they return; two slow,
//! the validity shrinks by the time they took.

use super::*;
use nix::sys::signal::Signal;
use stocklock::os::{freeze, signal};

/// Makes nodes slow: `CLIENT PAUSE <PAUSE> ALL` on each of `conns`, so
/// every command another client sends them waits until the pause ends.
/// Returns when every node has acknowledged (the pause is in effect), with
/// the instant the first command was sent: no pause began before it, so
/// none ends before it + [`PAUSE`].
///
/// Unlike `DEBUG SLEEP`, whose only answer comes when the sleep is over,
/// CLIENT PAUSE says when it has begun: the round that follows is certain
/// to be held up, by a known minimum, on both nodes.
async fn pause(conns: &mut [MultiplexedConnection]) -> Instant {
    let mut command = redis::cmd("CLIENT");
    command
        .arg("PAUSE")
        .arg(PAUSE.as_millis() as u64)
        .arg("ALL");
    let sent = Instant::now();
    let acks = join_all(conns.iter_mut().map(|conn| command.query_async::<()>(conn))).await;
    for ack in acks {
        ack.expect("CLIENT PAUSE");
    }
    sent
}

/// Resolves when the paused node behind `conn` serves commands again.
async fn pause_over(conn: &mut MultiplexedConnection) {
    let pong: String = redis::cmd("PING").query_async(conn).await.unwrap();
    assert_eq!(pong, "PONG");
}

#[tokio::test]
async fn two_nodes_of_five_down_the_lock_still_works_and_still_excludes() {
    bounded(async {
        let mut servers = start_nodes(5).await;
        let urls = urls(&servers);
        let nodes = open(&urls);
        warm_up(&nodes).await;
        let lock = nodes.lock("lock:{r3}");
        let (a, b) = (OwnerId::new("a"), OwnerId::new("b"));

        // Two connected nodes die.
        servers[3].stop().await;
        servers[4].stop().await;

        let held = lock
            .lock(&a, LONG, Duration::ZERO)
            .await
            .unwrap()
            .expect("three nodes of five are a majority")
            .deadline()
            .saturating_duration_since(Instant::now());
        assert!(held <= LONG - drift(LONG), "validity {held:?}");
        assert_eq!(holders(&servers[..3], lock.key()).await, held_by(&a, 3));

        let round = lock.try_round(&b, LONG).await;
        assert_eq!(
            (round.granted, round.answered, round.validity),
            (0, 3, None)
        );
        assert_eq!(
            lock.lock(&b, LONG, Duration::ZERO).await.unwrap(),
            Err(Refused::Held),
            "three nodes answered: the lock is held, quorum is not the question"
        );
        // Nodes never connected to (a fresh handle) count as down just the same.
        let fresh = open(&urls).lock(lock.key());
        assert_eq!(
            fresh.lock(&b, LONG, Duration::ZERO).await.unwrap(),
            Err(Refused::Held)
        );

        assert_eq!(lock.unlock(&a).await, 3);
        assert!(lock.lock(&b, LONG, Duration::ZERO).await.unwrap().is_ok());
        assert_eq!(lock.unlock(&b).await, 3);

        stop_all(&mut servers).await;
    })
    .await;
}

#[tokio::test]
async fn three_nodes_of_five_down_nobody_gets_the_lock_until_they_return() {
    bounded(async {
        let mut servers = start_nodes(5).await;
        let nodes = open(&urls(&servers));
        warm_up(&nodes).await;
        let lock = nodes.lock("lock:{r4}");
        let a = OwnerId::new("a");
        let no_quorum = Err(Refused::NoQuorum {
            answered: 2,
            quorum: 3,
        });

        let ports: Vec<u16> = servers[2..].iter().map(RedisServer::port).collect();
        for server in &mut servers[2..] {
            server.stop().await;
        }

        assert_eq!(
            lock.lock(&a, LONG, Duration::ZERO).await.unwrap(),
            no_quorum
        );
        let wait = Duration::from_millis(300);
        let started = Instant::now();
        assert_eq!(lock.lock(&a, LONG, wait).await.unwrap(), no_quorum);
        let waited = started.elapsed();
        assert!(
            waited >= wait - RETRY_MAX,
            "gave up after {waited:?} of a {wait:?} wait"
        );
        assert!(
            waited < wait + Duration::from_secs(1),
            "gave up only after {waited:?}"
        );
        // The two live nodes it got in each round were given back.
        assert_eq!(holders(&servers[..2], lock.key()).await, vec![None; 2]);

        // The three come back on their ports (empty: no persistence).
        for (server, port) in servers[2..].iter_mut().zip(ports) {
            *server = RedisServer::start(Some(port))
                .await
                .expect("restart a redis-server on its port");
        }
        let started = Instant::now();
        lock.lock(&a, LONG, Duration::from_secs(3))
            .await
            .unwrap()
            .expect("the majority is back: the lock works again");
        eprintln!(
            "redlock: lock taken again {:?} after the nodes returned",
            started.elapsed()
        );
        assert_eq!(holders(&servers, lock.key()).await, held_by(&a, 5));
        assert_eq!(lock.unlock(&a).await, 5);

        stop_all(&mut servers).await;
    })
    .await;
}

/// validity = lease - time spent acquiring - drift: two slow nodes (paused
/// for 500 ms) make the round last, and the validity shrinks by as much.
#[tokio::test]
async fn validity_shrinks_by_the_time_slow_nodes_took() {
    bounded(async {
        let mut servers = start_nodes(5).await;
        let urls = urls(&servers);
        let lease = Duration::from_secs(2);
        // Long enough to wait for the paused nodes' answers.
        let nodes = RedlockNodes::open(&urls)
            .unwrap()
            .with_node_timeout(Duration::from_millis(950));
        warm_up(&nodes).await;
        let lock = nodes.lock("lock:{r5}");
        let a = OwnerId::new("a");
        let mut slow = vec![conn(&urls[3]).await, conn(&urls[4]).await];

        // All five fast: nearly the whole lease.
        let round = lock.try_round(&a, lease).await;
        assert_eq!((round.granted, round.answered), (5, 5));
        let fast = round.validity.expect("a free lock on five fast nodes");
        assert!(fast > lease - Duration::from_millis(100), "validity {fast:?}");
        assert_eq!(fast, lease - round.elapsed - drift(lease));
        assert_eq!(lock.unlock(&a).await, 5);

        // Two slow nodes: the round waits for their answers.
        let sent = pause(&mut slow).await;
        let before = Instant::now();
        let round = lock.try_round(&a, lease).await;
        let late = before - sent;
        eprintln!(
            "redlock: round with two paused nodes took {:?} (the pause began at most {late:?} before it)",
            round.elapsed
        );
        assert_eq!(
            (round.granted, round.answered),
            (5, 5),
            "the slow nodes must answer within the node timeout: {round:?}"
        );
        assert!(
            round.elapsed + late + CLOCKS >= PAUSE,
            "the round took {:?}, yet the nodes were paused for {PAUSE:?} from at most {late:?} before it",
            round.elapsed
        );
        assert!(
            round.elapsed >= Duration::from_millis(300),
            "{round:?}"
        );
        let slowed = round.validity.expect("1.5 s of a 2 s lease are left");
        assert_eq!(round.validity, validity(lease, round.elapsed));
        assert_eq!(slowed, lease - round.elapsed - drift(lease));
        assert!(slowed <= lease - Duration::from_millis(300), "{slowed:?}");
        assert!(fast - slowed >= Duration::from_millis(300));
        assert_eq!(lock.unlock(&a).await, 5);

        // The same through lock(): the deadline it hands out leaves only
        // the shrunk validity once the round is over.
        let sent = pause(&mut slow).await;
        let before = Instant::now();
        let held = lock
            .lock(&a, lease, Duration::ZERO)
            .await
            .unwrap()
            .expect("slow nodes still grant")
            .deadline()
            .saturating_duration_since(Instant::now());
        let late = before - sent;
        assert!(
            held + PAUSE <= lease - drift(lease) + late + CLOCKS,
            "validity {held:?} despite a {PAUSE:?} pause begun at most {late:?} before"
        );
        assert!(held <= lease - Duration::from_millis(300), "{held:?}");
        assert_eq!(lock.unlock(&a).await, 5);

        // With the default node timeout a slow node is not waited for: the
        // round costs about NODE_TIMEOUT, and the majority is the three
        // fast nodes.
        let quick = RedlockNodes::open(&urls).unwrap();
        warm_up(&quick).await;
        let lock = quick.lock("lock:{r5b}");
        let sent = pause(&mut slow).await;
        let round = lock.try_round(&a, lease).await;
        assert!(sent.elapsed() < PAUSE, "the round outlasted the pause");
        assert_eq!((round.granted, round.answered), (3, 3), "{round:?}");
        assert!(round.elapsed >= NODE_TIMEOUT, "{round:?}");
        assert_eq!(round.validity, validity(lease, round.elapsed));
        assert!(round.validity.unwrap() <= lease - NODE_TIMEOUT - drift(lease));
        // Once the pause is over a release leaves the key on no node: the
        // slow nodes ran the SET that timed out when the pause ended (why a
        // release goes to every node), and the release, sent after it on
        // the same connection, runs after it.
        for conn in &mut slow {
            pause_over(conn).await;
        }
        assert_eq!(lock.unlock(&a).await, 5, "the slow nodes' SETs ran");
        assert_eq!(holders(&servers, lock.key()).await, vec![None; 5]);

        stop_all(&mut servers).await;
    })
    .await;
}

/// A round refused because three nodes were too slow to answer must not
/// leave its SET behind on them once they wake: `lock` gives back what the
/// round may have got, and that release has to run after the late SET on
/// each slow node. If it does not, the slow nodes hold the key for a whole
/// lease for an owner that gave up, and every other owner is refused until
/// it runs out (a dashboard race had Redlock sell 2 of 50 in 20 s this way).
///
/// The nodes are frozen (SIGSTOP), as a starved machine or a stalled
/// server holds them: what is sent to them waits in the kernel's buffers,
/// a new connection too. (CLIENT PAUSE would not show it: Redis drops a
/// paused client's queued commands when the client hangs up.)
#[tokio::test]
async fn a_round_refused_by_frozen_nodes_leaves_no_lock_behind_on_them() {
    bounded(async {
        let mut servers = start_nodes(5).await;
        let urls = urls(&servers);
        // The default node timeout: the frozen nodes count as down.
        let nodes = RedlockNodes::open(&urls).unwrap();
        warm_up(&nodes).await;
        let lock = nodes.lock("lock:{r6}");
        let (a, b) = (OwnerId::new("a"), OwnerId::new("b"));
        let frozen: Vec<u32> = servers[2..].iter().map(|s| s.pid().unwrap()).collect();

        for &pid in &frozen {
            freeze(pid).await.unwrap();
        }
        let refused = lock.lock(&a, LONG, Duration::ZERO).await;
        for &pid in &frozen {
            signal(pid, Signal::SIGCONT);
        }
        assert_eq!(
            refused.unwrap(),
            Err(Refused::NoQuorum {
                answered: 2,
                quorum: 3
            })
        );

        // b's round is sent after a's SETs and a's release: whatever order
        // the woken nodes run them in, b must find the lock free.
        let grant = lock.lock(&b, LONG, Duration::from_secs(5)).await.unwrap();
        let left = holders(&servers, lock.key()).await;
        assert!(
            grant.is_ok(),
            "b refused ({grant:?}): the nodes hold {left:?}"
        );
        assert_eq!(left, held_by(&b, 5));
        assert_eq!(lock.unlock(&b).await, 5);
        assert_eq!(holders(&servers, lock.key()).await, vec![None; 5]);

        stop_all(&mut servers).await;
    })
    .await;
}
