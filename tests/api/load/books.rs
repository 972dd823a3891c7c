//! The books read before and after a run, and its resets, survive a store
//! that stalls past its one-second timeout once (a Redis starved of CPU on
//! a loaded machine: the dashboard's run failed so in suite runs, a read
//! and a reset of `lua-sharded` answered 503). Redis is paused for 3.5 s:
//! a read (the instance first waits up to a second for the others'
//! counts, then reads with a one-second timeout) is answered 503 within
//! about two, for certain; asked again, a read or a reset is answered once
//! the pause ends.

use std::future::IntoFuture;
use std::time::{Duration, Instant};

use stocklock::chaos::Chaos;
use stocklock::client::{Refused, StackClient};
use stocklock::store::Store;

use crate::helpers::{self, InProcess};

/// Longer than a read's two one-second timeouts, with a second to spare.
const PAUSE: Duration = Duration::from_millis(3_500);

#[tokio::test]
async fn the_books_are_read_again_while_the_store_answers_503() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let instance = InProcess::start(&store, "a", Chaos::off()).await;
    instance.reset("lua", 5, 0).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(axum::serve(listener, instance.0.clone()).into_future());
    let token = Some(helpers::ADMIN_TOKEN.to_owned());
    let client = StackClient::new(&url, token, Duration::from_secs(10)).unwrap();
    let skus = vec!["lua".to_owned()];
    let mut probe = helpers::redis_conn(&redis.url()).await;
    for round in ["plain", "retried", "reset"] {
        let mut admin = helpers::redis_conn(&redis.url()).await;
        let _: () = redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(PAUSE.as_millis() as u64)
            .arg("ALL")
            .query_async(&mut admin)
            .await
            .unwrap();
        helpers::until_paused(&mut probe).await;
        let asked = Instant::now();
        match round {
            "plain" => {
                let err = client.states(&skus).await.unwrap_err();
                assert!(Refused::is_unavailable(&err), "{err:#}");
            }
            "retried" => {
                let books = client.states_retried(&skus).await.unwrap();
                assert_eq!(books[0].remaining, 5);
                assert!(asked.elapsed() >= Duration::from_secs(2), "not paused");
            }
            _ => {
                // The run's resets too: one repeated is one that ran once.
                let books = client.reset_retried("lua", 7, 0).await.unwrap();
                assert_eq!((books.remaining, books.sold), (7, 0));
                assert!(asked.elapsed() >= Duration::from_secs(2), "not paused");
            }
        }
        // The pause over before the next round.
        tokio::time::sleep(PAUSE.saturating_sub(asked.elapsed())).await;
    }
    server.abort();
}
