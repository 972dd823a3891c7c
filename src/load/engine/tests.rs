//! Tests of `engine.rs`.

use std::sync::atomic::AtomicUsize;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

/// A server on 127.0.0.1 that answers every request with `answer(n)`
/// (n counts answers over all connections) and closes the connection
/// after the answers `close_after` says; it counts the connections.
async fn server(
    answer: fn(usize) -> Vec<u8>,
    close_after: fn(usize) -> bool,
) -> (Target, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::Relaxed);
            let answered = answered.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                loop {
                    // One request at a time: the engine never pipelines.
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buf.clear();
                    let n = answered.fetch_add(1, Ordering::Relaxed);
                    if socket.write_all(&answer(n)).await.is_err() || close_after(n) {
                        return;
                    }
                }
            });
        }
    });
    let target = Target {
        addr,
        authority: addr.to_string(),
    };
    (target, connections)
}

fn plan(requests: u64, timeout: Duration) -> Plan {
    Plan {
        method: Method::GET,
        paths: vec!["/deductStock/lua?sku=a".to_owned()],
        concurrency: 4,
        requests: Some(requests),
        duration: None,
        rate: None,
        timeout,
        history: None,
    }
}

#[tokio::test]
async fn a_connection_the_server_closes_is_replaced_and_no_answer_is_lost() {
    let (target, connections) = server(
        |n| {
            if n % 3 == 2 {
                b"HTTP/1.1 409 Conflict\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}"
                    .to_vec()
            } else {
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}".to_vec()
            }
        },
        |n| n % 3 == 2,
    )
    .await;
    let tally = run(
        &target,
        &plan(60, Duration::from_secs(30)),
        &Progress::default(),
    )
    .await;
    assert_eq!(tally.requests, 60);
    assert_eq!((tally.sold, tally.sold_out), (40, 20));
    assert_eq!(tally.errors.total(), 0, "{:?}", tally.errors);
    // 20 answers closed their connection; a worker opens another only
    // when it has a request left to send (4 workers).
    let opened = connections.load(Ordering::Relaxed);
    assert!((20..=24).contains(&opened), "{opened} connections");
    assert_eq!(tally.latency_us.len(), 60);
}

#[tokio::test]
async fn a_chunked_503_of_unknown_outcome_is_counted_as_unknown() {
    let (target, _) = server(
        |_| {
            b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n\
              9\r\n{\"outcome\r\n\
              b\r\n\":\"unknown\"\r\n1\r\n}\r\n0\r\n\r\n"
                .to_vec()
        },
        |_| false,
    )
    .await;
    let tally = run(
        &target,
        &plan(20, Duration::from_secs(30)),
        &Progress::default(),
    )
    .await;
    assert_eq!((tally.requests, tally.unknown), (20, 20));
    assert_eq!(tally.errors.total(), 0, "{:?}", tally.errors);
}

#[tokio::test]
async fn an_unanswered_request_times_out_and_a_refused_connect_is_counted() {
    // Accepts and reads, never answers.
    let (target, _) = server(|_| Vec::new(), |_| false).await;
    let tally = run(
        &target,
        &plan(4, Duration::from_millis(200)),
        &Progress::default(),
    )
    .await;
    assert_eq!((tally.requests, tally.errors.timeout), (4, 4));

    // A port nobody listens on any more.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let target = Target {
        addr,
        authority: addr.to_string(),
    };
    let tally = run(
        &target,
        &plan(4, Duration::from_secs(5)),
        &Progress::default(),
    )
    .await;
    assert_eq!((tally.requests, tally.errors.connect), (4, 4));
}
