//! Waiting for a lock: one try after another, asleep between them until a release is heard or
//! the holder's lease is over.

use std::future::Future;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::Wakeups;
use crate::Error;
use crate::hook::{Hook, Point};

/// One try at a lock, for [`wait_for_lock`]: ours now, or someone else's for a while yet.
///
/// ```
/// use stocklock_lock::{Hook, wakeups::{Attempt, Wakeups, wait_for_lock}};
/// # #[tokio::main] async fn main() -> Result<(), stocklock_lock::Error> {
/// let held = || async { Ok(Attempt::<()>::HeldFor(None)) }; // held, with no expiry
/// let once = std::time::Duration::ZERO; // no wait: one try
/// assert_eq!(wait_for_lock(&Wakeups::new(), "lock:{a}", once, &Hook::none(), held).await?, None);
/// # Ok(()) }
/// ```
pub enum Attempt<T> {
    /// The lock is ours.
    Acquired(T),
    /// Someone holds it; its lease has this long left (`None`: no expiry).
    HeldFor(Option<Duration>),
}

/// Where a taker stops each time it finds the lock held, before sleeping until a release or the
/// lease's end: a hook notes that the step waits for a lock (not for it), or holds the wait.
pub const WAITS: Point = Point::new("waits");

/// Tries `attempt` until it succeeds (`Some`) or `wait` runs out (`None`), sleeping between
/// tries until a release of `lock_key` is announced or the holder's TTL is over, whichever
/// comes first. Before each sleep the taker reaches [`WAITS`] of `hook`.
pub async fn wait_for_lock<T, F, Fut>(
    wakeups: &Wakeups,
    lock_key: &str,
    wait: Duration,
    hook: &Hook,
    mut attempt: F,
) -> Result<Option<T>, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Attempt<T>, Error>>,
{
    let deadline = Instant::now() + wait;
    let waiting = wakeups.notifier(lock_key);
    let notify: &Notify = &waiting;
    loop {
        // Register as a waiter before trying, so a release between the try
        // and the sleep is not missed.
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();

        let ttl = match attempt().await? {
            Attempt::Acquired(value) => return Ok(Some(value)),
            Attempt::HeldFor(ttl) => ttl,
        };
        let now = Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        // Re-check no later than when the holder's lease runs out.
        let recheck = match ttl {
            Some(ttl) => deadline.min(now + ttl.max(Duration::from_millis(1))),
            None => deadline,
        };
        hook.at(WAITS).await;
        tokio::select! {
            _ = &mut notified => {}
            _ = tokio::time::sleep_until(recheck) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn a_locks_notifier_goes_with_its_last_waiter() {
        let wakeups = Wakeups::new();
        for key in 0..1000 {
            let got = wait_for_lock(
                &wakeups,
                &format!("lock:{{{key}}}"),
                Duration::ZERO,
                &Hook::none(),
                || async { Ok::<_, Error>(Attempt::Acquired(())) },
            )
            .await
            .unwrap();
            assert_eq!(got, Some(()));
        }
        assert_eq!(
            wakeups.waited_on(),
            0,
            "ever new locks leave nothing behind"
        );

        // Two waiters of one lock: the entry stays until both are gone, and a
        // release wakes the one still waiting.
        let first = wakeups.notifier("lock:{x}");
        let waiter = {
            let wakeups = wakeups.clone();
            tokio::spawn(async move {
                let mut tries = 0;
                wait_for_lock(
                    &wakeups,
                    "lock:{x}",
                    Duration::from_secs(5),
                    &Hook::none(),
                    || {
                        tries += 1;
                        let acquired = tries > 1;
                        async move {
                            Ok::<_, Error>(if acquired {
                                Attempt::Acquired(())
                            } else {
                                Attempt::HeldFor(Some(Duration::from_secs(5)))
                            })
                        }
                    },
                )
                .await
            })
        };
        // The waiter holds the entry (with `first`) until woken.
        while Arc::strong_count(first.shared()) < 3 {
            tokio::task::yield_now().await;
        }
        drop(first);
        assert_eq!(wakeups.waited_on(), 1);
        wakeups.released("lock:{x}");
        let woken = tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("the release woke the waiter")
            .unwrap()
            .unwrap();
        assert_eq!(woken, Some(()));
        assert_eq!(wakeups.waited_on(), 0);
    }
}
