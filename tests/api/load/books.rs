//! The books read before and after a run, and its resets, survive a store
//! that stalls past its one-second timeout once (a Redis starved of CPU on
//! a loaded machine: the dashboard's run failed so in suite runs, a read
//! and a reset of `lua-sharded` answered 503). Redis is paused for 3.5 s:
//! a read or a reset (the instance first waits up to a second for the
//! others' counts, then calls Redis with a one-second timeout) is answered
//! 503 within about two, for certain; asked again, each is answered once
//! the pause ends.

use std::future::IntoFuture;
use std::time::{Duration, Instant};

use stocklock::chaos::Chaos;
use stocklock::client::{Refused, StackClient};
use stocklock::store::Store;

use crate::helpers::{self, InProcess};

/// Longer than a read's or a reset's two one-second timeouts (the
/// instance's wait for the others' counts, then its call), with a second
/// and a half to spare; the second attempt (at about 2.2 s) is answered
/// when it ends, within its own timeouts.
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
    let mut admin = helpers::redis_conn(&redis.url()).await;
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(PAUSE.as_millis() as u64)
        .arg("ALL")
        .query_async(&mut admin)
        .await
        .unwrap();
    helpers::until_paused(&mut helpers::redis_conn(&redis.url()).await).await;
    let asked = Instant::now();
    // All four at once, under the one pause. Each reset sets the stock to
    // 7, the cut-off ones too (their scripts run when the pause ends): one
    // repeated is one that ran once.
    let (read, read_again, reset, reset_again) = tokio::join!(
        client.states(&skus),
        client.states_retried(&skus),
        client.reset("lua", 7, 0),
        client.reset_retried("lua", 7, 0),
    );
    for (what, err) in [("read", read.err()), ("reset", reset.err())] {
        let err = err.unwrap_or_else(|| panic!("the plain {what} was answered in a paused Redis"));
        assert!(Refused::is_unavailable(&err), "{what}: {err:#}");
    }
    let books = read_again.unwrap();
    assert!(
        books[0].remaining == 5 || books[0].remaining == 7,
        "{books:?}"
    );
    let books = reset_again.unwrap();
    assert_eq!((books.remaining, books.sold), (7, 0));
    assert!(asked.elapsed() >= Duration::from_secs(2), "not paused");
    assert_eq!(client.states(&skus).await.unwrap()[0].remaining, 7);
    server.abort();
}
