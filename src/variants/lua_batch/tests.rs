//! The lanes and their driver against a `send` of the tests' own: a lone
//! buyer, batches made of whoever queued during a call, failed, dropped
//! and short calls.

use std::sync::Mutex;

use tokio::sync::Notify;

use super::super::lane::Lane;
use super::*;

/// Queues a buyer with id `id`; its reply's receiver, and whether it must start a driver.
fn queue(lane: &Lane<Buyer>, id: &str) -> (oneshot::Receiver<Reply>, bool) {
    let (reply, answer) = oneshot::channel();
    let start = lane.push(Buyer {
        request_id: id.to_owned(),
        reply,
    });
    (answer, start)
}

/// Seven numbers per id: the id's number as the unit.
fn answers(ids: &[String]) -> Vec<i64> {
    ids.iter()
        .flat_map(|id| [1, id.parse().unwrap(), 0, 0, 0, 0, 0])
        .collect()
}

#[test]
fn a_lone_buyer_is_sent_at_once_and_alone() {
    let lane = Arc::new(Lane::default());
    let (mut answer, start) = queue(&lane, "7");
    assert!(start, "nothing in flight: the buyer starts the driver");
    let sent = Arc::new(Mutex::new(Vec::new()));
    let log = sent.clone();
    let driver = drive(lane.clone(), 64, move |ids: Vec<String>| {
        log.lock().unwrap().push(ids.clone());
        async move { Ok(answers(&ids)) }
    });
    // Polled once, with a Redis that answers at once: a driver that
    // waited for company (a timer, a yield) would not be done yet.
    let mut driver = std::pin::pin!(driver);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(
        driver.as_mut().poll(&mut cx).is_ready(),
        "sent on the first poll"
    );
    assert_eq!(*sent.lock().unwrap(), [["7"]]);
    assert_eq!(answer.try_recv().unwrap().unwrap()[1], 7);
    assert!(
        !lane.state().in_flight,
        "the lane is idle once nobody waits"
    );
}

#[tokio::test]
async fn whoever_queued_during_a_call_is_the_next_batch_up_to_max() {
    let lane = Arc::new(Lane::default());
    let (first, start) = queue(&lane, "0");
    assert!(start);
    let gate = Arc::new(Notify::new());
    let entered = Arc::new(Notify::new());
    let calls = Arc::new(Mutex::new(Vec::new()));
    let (g, e, log) = (gate.clone(), entered.clone(), calls.clone());
    let driver = tokio::spawn(drive(lane.clone(), 4, move |ids: Vec<String>| {
        log.lock().unwrap().push(ids.clone());
        let (g, e) = (g.clone(), e.clone());
        async move {
            e.notify_one();
            g.notified().await;
            Ok(answers(&ids))
        }
    }));
    // The first call is in flight: ten more buyers queue behind it.
    entered.notified().await;
    let mut later = Vec::new();
    for i in 1..=10 {
        let (answer, start) = queue(&lane, &i.to_string());
        assert!(!start, "a driver runs: buyer {i} only queues");
        later.push(answer);
    }
    while !driver.is_finished() {
        gate.notify_one();
        tokio::task::yield_now().await;
    }
    let calls = calls.lock().unwrap().clone();
    let sizes: Vec<usize> = calls.iter().map(Vec::len).collect();
    assert_eq!(sizes, [1, 4, 4, 2], "{calls:?}");
    assert_eq!(first.await.unwrap().unwrap()[1], 0);
    for (i, answer) in later.into_iter().enumerate() {
        assert_eq!(
            answer.await.unwrap().unwrap()[1],
            i as i64 + 1,
            "each buyer its own answer"
        );
    }
}

#[tokio::test]
async fn a_failed_call_fails_every_buyer_in_it_and_the_lane_goes_on() {
    let lane = Arc::new(Lane::default());
    let (a, _) = queue(&lane, "1");
    let (b, start) = queue(&lane, "2");
    assert!(!start);
    drive(lane.clone(), 64, |ids: Vec<String>| async move {
        assert_eq!(ids.len(), 2);
        Err(StoreError(redis::RedisError::from(std::io::Error::from(
            std::io::ErrorKind::TimedOut,
        ))))
    })
    .await;
    assert!(a.await.unwrap().is_err());
    assert!(b.await.unwrap().is_err());
    let (c, start) = queue(&lane, "3");
    assert!(start, "an idle lane starts a new driver");
    drive(
        lane,
        64,
        |ids: Vec<String>| async move { Ok(answers(&ids)) },
    )
    .await;
    assert_eq!(c.await.unwrap().unwrap()[1], 3);
}

#[tokio::test]
async fn a_driver_dropped_mid_call_leaves_no_buyer_waiting_for_ever() {
    let lane = Arc::new(Lane::default());
    let (mut first, _) = queue(&lane, "1");
    let driver = drive(lane.clone(), 64, |_ids: Vec<String>| {
        std::future::pending::<Result<Vec<i64>, StoreError>>()
    });
    let mut driver = Box::pin(driver);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(
        driver.as_mut().poll(&mut cx).is_pending(),
        "the call is in flight"
    );
    let (mut queued, start) = queue(&lane, "2");
    assert!(!start);
    drop(driver);
    // Closed, not empty: nobody will ever answer them.
    let closed = |r: Result<Reply, oneshot::error::TryRecvError>| {
        matches!(r, Err(oneshot::error::TryRecvError::Closed))
    };
    assert!(
        closed(first.try_recv()),
        "the buyer in the call hears its reply dropped"
    );
    assert!(closed(queued.try_recv()), "so does the queued one");
    let (_, start) = queue(&lane, "3");
    assert!(start, "the next buyer starts a driver");
}

#[tokio::test]
async fn a_short_answer_is_an_error_for_every_buyer() {
    let lane = Arc::new(Lane::default());
    let (a, _) = queue(&lane, "1");
    let (b, _) = queue(&lane, "2");
    drive(lane, 64, |_ids: Vec<String>| async move {
        Ok(vec![1, 1, 0, 0, 0, 0, 0])
    })
    .await;
    assert!(a.await.unwrap().is_err());
    assert!(b.await.unwrap().is_err());
}
