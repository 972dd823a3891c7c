//! The books read after a run survive a store that stalls past its
//! one-second timeout once (a Redis starved of CPU on a loaded machine:
//! the dashboard's run once failed so, its last read answered 503). Redis
//! is paused for 1.5 s: the first read times out for certain, the one
//! asked again 200 ms later is answered when the pause ends.

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
    let client = StackClient::new(&url, None, Duration::from_secs(10)).unwrap();
    let skus = vec!["lua".to_owned()];
    let mut probe = helpers::redis_conn(&redis.url()).await;
    for retried in [false, true] {
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
        match retried {
            false => {
                let err = client.states(&skus).await.unwrap_err();
                assert!(Refused::is_unavailable(&err), "{err:#}");
            }
            true => {
                let books = client.states_retried(&skus).await.unwrap();
                assert_eq!(books[0].remaining, 5);
                assert!(asked.elapsed() >= Duration::from_secs(2), "not paused");
            }
        }
        // The pause over before the next round.
        tokio::time::sleep(PAUSE.saturating_sub(asked.elapsed())).await;
    }
    server.abort();
}
