//! Two sessions exclude each other, a try-lock leaves nothing behind, the
//! recipe is not reentrant, and tokens grow in the order of the holders.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use zookeeper_client as zk;

use super::{LONG, PROMPT, watches};
use crate::zookeeper::Servers;

#[tokio::test]
async fn two_sessions_exclude_each_other_and_tokens_grow() {
    let Some(servers) = Servers::start(1).await else {
        return;
    };
    let a = servers.session(LONG).await;
    let b = servers.session(LONG).await;
    let (lock_a, lock_b) = (a.lock("sku-1").unwrap(), b.lock("sku-1").unwrap());

    let first = lock_a.lock(Duration::ZERO).await.unwrap().expect("free");
    assert_eq!(
        lock_a.holder().await.unwrap().as_deref(),
        Some(&*first.path)
    );
    assert_eq!(
        lock_b.lock(Duration::ZERO).await.unwrap(),
        None,
        "held by a"
    );
    assert!(
        watches(&servers).await.is_empty(),
        "a try-lock leaves no watch behind"
    );
    let started = Instant::now();
    assert_eq!(
        lock_b.lock(Duration::from_millis(300)).await.unwrap(),
        None,
        "held by a"
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    // b's refused attempts left nothing queued behind a.
    let client = zk::Client::connect(&servers.connect_string())
        .await
        .unwrap();
    assert_eq!(client.list_children(lock_a.dir()).await.unwrap().len(), 1);

    assert!(lock_a.unlock(&first).await.unwrap());
    let second = lock_b
        .lock(Duration::ZERO)
        .await
        .unwrap()
        .expect("released");
    assert!(
        second.token > first.token && second.sequence > first.sequence,
        "{second:?} after {first:?}"
    );
    // A second lock by the holder is not reentrant: it queues behind
    // itself and times out.
    assert_eq!(
        lock_b.lock(Duration::from_millis(100)).await.unwrap(),
        None,
        "the recipe is not reentrant"
    );
    assert!(lock_b.unlock(&second).await.unwrap());
    assert!(
        !lock_b.unlock(&second).await.unwrap(),
        "a second release finds nothing"
    );

    // Four sessions take the lock 25 times each: never two inside at once,
    // and each holder's token is greater than the one before it.
    let inside = Arc::new(AtomicUsize::new(0));
    let tokens = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut contenders = JoinSet::new();
    for _ in 0..4 {
        let session = servers.session(LONG).await;
        let (inside, tokens) = (inside.clone(), tokens.clone());
        contenders.spawn(async move {
            let lock = session.lock("sku-1").unwrap();
            for _ in 0..25 {
                let hold = lock.lock(PROMPT).await.unwrap().expect("a turn within 5 s");
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                tokens.lock().unwrap().push(hold.token);
                tokio::task::yield_now().await;
                inside.fetch_sub(1, Ordering::SeqCst);
                assert!(lock.unlock(&hold).await.unwrap());
            }
        });
    }
    while let Some(done) = contenders.join_next().await {
        done.unwrap();
    }
    let tokens = tokens.lock().unwrap().clone();
    assert_eq!(tokens.len(), 100);
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]) && tokens[0] > second.token,
        "tokens in the order of the holders: {tokens:?}"
    );

    // Uncontended: lock and unlock pairs per second on one session.
    let pairs = 200;
    let started = Instant::now();
    for _ in 0..pairs {
        let hold = lock_a.lock(Duration::ZERO).await.unwrap().expect("free");
        lock_a.unlock(&hold).await.unwrap();
    }
    let elapsed = started.elapsed();
    eprintln!(
        "zookeeper lock: {pairs} uncontended lock/unlock pairs in {elapsed:?}: {:.0} pairs/s",
        f64::from(pairs) / elapsed.as_secs_f64()
    );
    drop((a, b, client));
    servers.stop().await;
}
