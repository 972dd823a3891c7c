//! A property of the lock library, against a real Redis: whatever two
//! tasks do on one key (acquire, maybe dropped at a random moment; hold,
//! release, drop the guard; delete the key behind the lock's back; pause
//! the store), no two guards ever overlap while both believe they hold the
//! lock, and nothing is left once the sequence ends and the leases run out.
//!
//! And while a guard believes it holds the lock (not lost, its deadline
//! not passed when the store's answer came), the store says the key is
//! its own: looked at when it is taken and before and after each hold.
//!
//! A guard believes it holds the lock from the moment its acquire returns
//! until the first of: its release or drop, the moment it learns the lock
//! lost (`lost()` resolves while it holds), and its deadline (the last
//! renewal's). A deletion of the key is a fault the lock cannot prevent: a
//! guard whose key was deleted under it is judged up to the deletion only
//! (`lock_lost` measures how soon it learns). Sequences come from a
//! deterministic generator (proptest, shrunk on failure), timings from the
//! machine; leases are short (250 ms, renewed every 83 ms) so that pauses
//! and waits cross them.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use stocklock::lock::{LeaseLock, LockGuard, LockOptions, ReentrantLock, Wakeups};
use stocklock::store::Store;

mod history;

use history::{History, look};

use crate::helpers;
use crate::lock::setup;

const LEASE: Duration = Duration::from_millis(250);
pub(super) const KEY: &str = "lock:{property}";
const FENCE: &str = "fence:{property}";

#[derive(Clone, Copy, Debug)]
enum Kind {
    Lease,
    Reentrant,
    Fenced,
}

#[derive(Clone, Debug)]
enum Op {
    /// Waits up to `wait_ms`; with `drop_us`, the acquire is dropped
    /// after that long if it has not returned.
    Acquire {
        renew: bool,
        wait_ms: u64,
        drop_us: Option<u64>,
    },
    Hold(u64),
    Release,
    Drop,
    /// `DEL` of the key, behind the lock's back.
    Delete,
    /// `CLIENT PAUSE ms ALL`.
    Pause(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<bool>(), 0u64..200, proptest::option::weighted(0.3, 0u64..4_000))
            .prop_map(|(renew, wait_ms, drop_us)| Op::Acquire { renew, wait_ms, drop_us }),
        3 => (0u64..150).prop_map(Op::Hold),
        2 => Just(Op::Release),
        1 => Just(Op::Drop),
        1 => Just(Op::Delete),
        1 => (0u64..300).prop_map(Op::Pause),
    ]
}

fn case() -> impl Strategy<Value = (Kind, Vec<Op>, Vec<Op>)> {
    let kind = prop_oneof![Just(Kind::Lease), Just(Kind::Reentrant), Just(Kind::Fenced)];
    let ops = || proptest::collection::vec(op(), 1..10);
    (kind, ops(), ops())
}

async fn acquire(
    store: &Store,
    wakeups: &Wakeups,
    kind: Kind,
    options: &LockOptions,
) -> Option<LockGuard> {
    let conn = store.conn().await.ok()?;
    let taken = match kind {
        Kind::Lease => {
            LeaseLock::new(conn, KEY, wakeups.clone())
                .acquire(options)
                .await
        }
        Kind::Reentrant => {
            ReentrantLock::new(conn, KEY, wakeups.clone())
                .acquire(options)
                .await
        }
        Kind::Fenced => {
            ReentrantLock::new(conn, KEY, wakeups.clone())
                .fenced(FENCE)
                .acquire(options)
                .await
        }
    };
    taken.ok()
}

/// Plays one task's `ops`, noting its beliefs in `history`.
async fn play(
    task: usize,
    kind: Kind,
    ops: Vec<Op>,
    store: Store,
    wakeups: Wakeups,
    url: String,
    history: Arc<Mutex<History>>,
) {
    let mut held: Option<(usize, LockGuard)> = None;
    let mut admin = helpers::redis_conn(&url).await;
    for op in ops {
        match op {
            Op::Acquire {
                renew,
                wait_ms,
                drop_us,
            } => {
                if held.is_some() {
                    continue;
                }
                let options = LockOptions::new()
                    .lease(LEASE)
                    .renew(renew)
                    .wait(Duration::from_millis(wait_ms));
                let asked = Instant::now();
                let taking = acquire(&store, &wakeups, kind, &options);
                let guard = match drop_us {
                    Some(us) => tokio::time::timeout(Duration::from_micros(us), taking)
                        .await
                        .ok()
                        .flatten(),
                    None => taking.await,
                };
                match guard {
                    Some(guard) => {
                        let id = history.lock().unwrap().acquired(task, asked);
                        look(&mut admin, id, &guard, &history).await;
                        held = Some((id, guard));
                    }
                    None if drop_us.is_some() => history.lock().unwrap().dropped += 1,
                    None => {}
                }
            }
            Op::Hold(ms) => {
                let pause = tokio::time::sleep(Duration::from_millis(ms));
                match &held {
                    Some((id, guard)) => {
                        look(&mut admin, *id, guard, &history).await;
                        tokio::select! {
                            () = pause => look(&mut admin, *id, guard, &history).await,
                            () = guard.lost() => history.lock().unwrap().ended(*id, guard.deadline()),
                        }
                    }
                    None => pause.await,
                }
            }
            Op::Release => {
                if let Some((id, guard)) = held.take() {
                    history.lock().unwrap().ended(id, guard.deadline());
                    let _ = guard.release().await;
                }
            }
            Op::Drop => {
                if let Some((id, guard)) = held.take() {
                    history.lock().unwrap().ended(id, guard.deadline());
                    drop(guard);
                }
            }
            Op::Delete => {
                let n = {
                    let mut history = history.lock().unwrap();
                    history.deletions.push((Instant::now(), None));
                    history.deletions.len() - 1
                };
                let _: Result<i64, _> = redis::cmd("DEL").arg(KEY).query_async(&mut admin).await;
                history.lock().unwrap().deletions[n].1 = Some(Instant::now());
            }
            Op::Pause(ms) => {
                let _: Result<(), _> = redis::cmd("CLIENT")
                    .arg("PAUSE")
                    .arg(ms)
                    .arg("ALL")
                    .query_async(&mut admin)
                    .await;
            }
        }
    }
    if let Some((id, guard)) = held.take() {
        history.lock().unwrap().ended(id, guard.deadline());
        drop(guard);
    }
}

/// Plays both tasks at once, then checks the history and what is left.
async fn run(
    store: &Store,
    wakeups: &Wakeups,
    url: &str,
    (kind, a, b): (Kind, Vec<Op>, Vec<Op>),
) -> Result<Totals, String> {
    let history = Arc::new(Mutex::new(History::default()));
    let tasks = [a, b].into_iter().enumerate().map(|(task, ops)| {
        tokio::spawn(play(
            task,
            kind,
            ops,
            store.clone(),
            wakeups.clone(),
            url.to_owned(),
            history.clone(),
        ))
    });
    for task in tasks.collect::<Vec<_>>() {
        task.await.map_err(|err| format!("a task failed: {err}"))?;
    }
    let history = Arc::into_inner(history)
        .expect("both tasks done")
        .into_inner()
        .unwrap();
    if let Some(overlap) = history.overlap() {
        return Err(format!("{overlap}: {history:#?}"));
    }
    if let Some(disagreement) = history.disagreements.first() {
        return Err(format!("{disagreement}: {history:#?}"));
    }
    // Every guard is gone: past any pause and a lease (and a renewal after
    // it), nothing holds the key, renews it or waits for it.
    tokio::time::sleep(Duration::from_millis(300) + LEASE + LEASE / 3).await;
    let mut admin = helpers::redis_conn(url).await;
    let left: i64 = redis::cmd("EXISTS")
        .arg(KEY)
        .query_async(&mut admin)
        .await
        .map_err(|e| e.to_string())?;
    if left != 0 {
        let ttl: i64 = redis::cmd("PTTL")
            .arg(KEY)
            .query_async(&mut admin)
            .await
            .unwrap_or(-3);
        return Err(format!("the key is left behind (PTTL {ttl} ms)"));
    }
    if wakeups.waited_on() != 0 {
        return Err("a waiter stays registered".into());
    }
    Ok(Totals {
        guards: history.beliefs.len(),
        dropped: history.dropped,
        deletions: history.deletions.len(),
        agreed: history.agreed,
    })
}

/// What the cases did, added up (printed: the test exercised what it says).
#[derive(Default, Debug)]
struct Totals {
    guards: usize,
    dropped: usize,
    deletions: usize,
    agreed: usize,
}

#[test]
fn no_two_guards_overlap_and_nothing_is_left_whatever_two_tasks_do() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (redis, store, wakeups) = runtime.block_on(setup());
    let url = redis.url();
    let config = Config {
        cases: 24,
        failure_persistence: None,
        max_shrink_iters: 200,
        ..Config::default()
    };
    let rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let totals = Mutex::new(Totals::default());
    let outcome = runner.run(&case(), |case| {
        let done = runtime
            .block_on(run(&store, &wakeups, &url, case))
            .map_err(TestCaseError::fail)?;
        let mut totals = totals.lock().unwrap();
        totals.guards += done.guards;
        totals.dropped += done.dropped;
        totals.deletions += done.deletions;
        totals.agreed += done.agreed;
        Ok(())
    });
    drop(runtime);
    drop(redis);
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
    let totals = totals.into_inner().unwrap();
    helpers::note(&format!("lock property: {totals:?}"));
    assert!(
        totals.guards > 0 && totals.dropped > 0 && totals.deletions > 0 && totals.agreed > 0,
        "{totals:?}"
    );
}
