//! No automatic retry of a sale on the cluster: a sale whose answer never
//! came is `unknown`, as on one server, and its script ran at most once.
//! redis-rs's cluster client, left to its defaults, sends a request again
//! on a new connection when its connection drops: a script that had run
//! then runs twice, and the buyer is told `sold` for one of two sales.
//!
//! The cluster's nodes announce relays ([`Relay`]) as their addresses, so
//! the instance reaches each node through one; armed, a relay passes the
//! next sale script on and drops the connection instead of its answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use stocklock::chaos::Chaos;
use stocklock::store::Store;
use stocklock::up::redis::{RedisServer, create_cluster};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::helpers::{InProcess, in_process_config};

/// Whether the next sale script is to lose its answer, and how many did.
#[derive(Clone, Default)]
struct Faults {
    armed: Arc<AtomicBool>,
    answers_dropped: Arc<AtomicUsize>,
}

/// A TCP relay in front of one node (its task ends with the test's runtime).
struct Relay {
    port: u16,
}

impl Relay {
    async fn start(node_port: u16, faults: Faults) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if let Ok(server) = TcpStream::connect(("127.0.0.1", node_port)).await {
                    tokio::spawn(pass(client, server, faults.clone()));
                }
            }
        });
        Relay { port }
    }
}

/// Passes one connection's bytes both ways. The connection that sends the
/// sale script while the fault is armed is doomed: its script reaches the
/// node (and runs), and the node's answer is dropped with the connection.
async fn pass(client: TcpStream, server: TcpStream, faults: Faults) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let doomed = AtomicBool::new(false);
    let up = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = client_read.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            let script = buf[..n].windows(7).any(|w| w == b"EVALSHA");
            if script && faults.armed.swap(false, Ordering::SeqCst) {
                doomed.store(true, Ordering::SeqCst);
            }
            if server_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    let down = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = server_read.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            // The only request outstanding on the connection is the
            // script: this is its answer, so it ran.
            if doomed.load(Ordering::SeqCst) {
                faults.answers_dropped.fetch_add(1, Ordering::SeqCst);
                return;
            }
            if client_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    // Either side done: both are dropped, closing both connections.
    tokio::select! {
        _ = up => {}
        _ = down => {}
    }
}

/// Three masters, each announcing its relay as its address; returns once
/// every node's slot map names only relays (the nodes learn each other's
/// announcements by gossip, which has no event to wait for but CLUSTER SLOTS).
async fn cluster_behind_relays(faults: &Faults) -> (Vec<RedisServer>, Vec<Relay>) {
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(RedisServer::start_cluster_node().await.unwrap());
    }
    create_cluster(&nodes).await.unwrap();
    let mut relays = Vec::new();
    for node in &nodes {
        let relay = Relay::start(node.port(), faults.clone()).await;
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("cluster-announce-port")
            .arg(relay.port)
            .query_async(&mut conn(&node.url()).await)
            .await
            .unwrap();
        relays.push(relay);
    }
    let relay_ports: BTreeSet<u16> = relays.iter().map(|r| r.port).collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    for node in &nodes {
        let mut plain = conn(&node.url()).await;
        loop {
            let slots: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query_async(&mut plain)
                .await
                .unwrap();
            let ports: BTreeSet<u16> = slots
                .iter()
                .map(|range| {
                    let master = Vec::<redis::Value>::from_redis_value_ref(&range[2]).unwrap();
                    u16::from_redis_value_ref(&master[1]).unwrap()
                })
                .collect();
            if ports == relay_ports {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{}: the relays were not announced: {ports:?}",
                node.url()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    (nodes, relays)
}

/// An in-process instance on the cluster, reaching it through `relays`.
async fn instance_on(relays: &[Relay]) -> InProcess {
    let urls: Vec<String> = relays
        .iter()
        .map(|r| format!("redis://127.0.0.1:{}", r.port))
        .collect();
    let store = Store::open_cluster(&urls).unwrap();
    let config = stocklock::http::InstanceConfig {
        chaos: Chaos::off(),
        ..in_process_config("t")
    };
    InProcess::listening(&store, config).await
}

/// The connection drops after the sale script ran, its answer lost on the
/// way: the buyer is told `unknown`, and the script ran once.
#[tokio::test]
async fn a_sale_whose_connection_dropped_after_the_script_is_unknown_and_ran_once() {
    bounded(async {
        let faults = Faults::default();
        let (_nodes, relays) = cluster_behind_relays(&faults).await;
        let instance = instance_on(&relays).await;
        let sku = "retry2";
        instance.reset(sku, 5, 0).await;
        let (status, body) = instance.get(&format!("/deductStock/lua?sku={sku}")).await;
        assert_eq!(status, 200, "{body}");

        faults.armed.store(true, Ordering::SeqCst);
        let (status, body) = instance.get(&format!("/deductStock/lua?sku={sku}")).await;
        assert_eq!(faults.answers_dropped.load(Ordering::SeqCst), 1);
        let state = instance.state(sku).await;
        assert_eq!(
            (state.sold, state.remaining),
            (2, 3),
            "the script whose answer was lost ran once, no more: {state:?}; answered {status} {body}"
        );
        assert_eq!(
            (status.as_u16(), body["outcome"].as_str()),
            (503, Some("unknown")),
            "{body}"
        );
    })
    .await;
}

/// A sale script held up on its master (writes paused) past the client's
/// response timeout: answered `unknown`, run once when the master resumes.
/// (Passes with the client's default retries too: its overall timeout,
/// equal to the response timeout, ends the request before a retry.)
#[tokio::test]
async fn a_sale_held_up_past_the_timeout_is_unknown_and_runs_once() {
    bounded(async {
        let (nodes, relays) = cluster_behind_relays(&Faults::default()).await;
        let instance = instance_on(&relays).await;
        let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
        let sku = "retry1";
        instance.reset(sku, 5, 0).await;
        // One sale first: the instance's connections to the masters are made.
        let (status, body) = instance.get(&format!("/deductStock/lua?sku={sku}")).await;
        assert_eq!(status, 200, "{body}");

        // The master of the SKU: the one node that answers for its key.
        let mut master = None;
        for url in &urls {
            let mut plain = conn(url).await;
            let owned: redis::RedisResult<Option<i64>> = redis::cmd("GET")
                .arg(format!("stock:{{{sku}}}"))
                .query_async(&mut plain)
                .await;
            if owned.is_ok() {
                master = Some(plain);
            }
        }
        let mut master = master.expect("a master serves the SKU");
        // Writes (scripts included) wait; reads and CLIENT UNPAUSE do not.
        let _: () = redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(60_000)
            .arg("WRITE")
            .query_async(&mut master)
            .await
            .unwrap();
        let (status, body) = instance.get(&format!("/deductStock/lua?sku={sku}")).await;
        // Whatever it was sent runs now, before any command that comes
        // after the unpause: Redis serves the clients it held first.
        let _: () = redis::cmd("CLIENT")
            .arg("UNPAUSE")
            .query_async(&mut master)
            .await
            .unwrap();
        assert_eq!(
            (status.as_u16(), body["outcome"].as_str()),
            (503, Some("unknown")),
            "{body}"
        );
        let state = instance.state(sku).await;
        assert_eq!(
            (state.sold, state.remaining),
            (2, 3),
            "the held-up script ran once, when the master resumed: {state:?}"
        );
    })
    .await;
}
