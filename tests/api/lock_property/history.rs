//! The property test's history: each guard's belief that it holds the
//! lock, the deletions behind the lock's back, and what the store said
//! when a believing guard looked.

use std::sync::Mutex;
use std::time::Instant;

use stocklock::lock::LockGuard;

use super::KEY;

/// One guard's time believing it holds the lock.
#[derive(Clone, Debug)]
pub(super) struct Belief {
    task: usize,
    /// When its acquire was called: the store granted it somewhere
    /// between then and `from`.
    asked: Instant,
    from: Instant,
    /// `None` while it still holds.
    until: Option<Instant>,
}

#[derive(Default, Debug)]
pub(super) struct History {
    pub(super) beliefs: Vec<Belief>,
    /// Each `DEL` behind the lock's back: when it was sent, and when its
    /// answer came (`None` while under way): it ran somewhere between.
    pub(super) deletions: Vec<(Instant, Option<Instant>)>,
    /// Guards that believed they held the lock while the store said the
    /// key was not theirs.
    pub(super) disagreements: Vec<String>,
    /// Acquires dropped before they returned.
    pub(super) dropped: usize,
    /// Store looks that agreed with a believing guard.
    pub(super) agreed: usize,
}

impl History {
    pub(super) fn acquired(&mut self, task: usize, asked: Instant) -> usize {
        self.beliefs.push(Belief {
            task,
            asked,
            from: Instant::now(),
            until: None,
        });
        self.beliefs.len() - 1
    }

    /// Guard `id`'s belief ends now, or at `deadline` if that was before.
    pub(super) fn ended(&mut self, id: usize, deadline: Instant) {
        let belief = &mut self.beliefs[id];
        if belief.until.is_none() {
            belief.until = Some(Instant::now().min(deadline));
        }
    }

    /// Two guards that believed at once, neither's key deleted before.
    pub(super) fn overlap(&self) -> Option<String> {
        let cut = |b: &Belief| {
            let until = b.until.expect("every belief ends");
            // A deletion that may have run while it believed: judged up
            // to the deletion's sending.
            let deleted = self
                .deletions
                .iter()
                .filter(|(sent, done)| done.is_none_or(|done| done >= b.asked) && *sent < until)
                .map(|(sent, _)| (*sent).max(b.from));
            deleted.min().unwrap_or(until)
        };
        for (i, a) in self.beliefs.iter().enumerate() {
            for (j, b) in self.beliefs.iter().enumerate().skip(i + 1) {
                if a.from < cut(b) && b.from < cut(a) {
                    return Some(format!(
                        "guard {i} (task {}) and guard {j} (task {}) overlap",
                        a.task, b.task
                    ));
                }
            }
        }
        None
    }
}

/// Whether the store says `guard` holds the key: a lease lock's value, or
/// a field of a reentrant lock's hash.
async fn owns(admin: &mut redis::aio::MultiplexedConnection, guard: &LockGuard) -> bool {
    let owner = guard.owner().as_str();
    let kind: String = redis::cmd("TYPE")
        .arg(KEY)
        .query_async(admin)
        .await
        .unwrap_or_default();
    match kind.as_str() {
        "string" => {
            let value: Option<String> = redis::cmd("GET")
                .arg(KEY)
                .query_async(admin)
                .await
                .unwrap_or_default();
            value.as_deref() == Some(owner)
        }
        "hash" => redis::cmd("HEXISTS")
            .arg(KEY)
            .arg(owner)
            .query_async(admin)
            .await
            .unwrap_or(false),
        _ => false,
    }
}

/// Looks at the store while guard `id` may believe it holds the lock: a
/// disagreement noted unless the guard was lost, its deadline passed
/// before the answer came, or the key was deleted behind it.
pub(super) async fn look(
    admin: &mut redis::aio::MultiplexedConnection,
    id: usize,
    guard: &LockGuard,
    history: &Mutex<History>,
) {
    let deadline = guard.deadline();
    if guard.is_lost() {
        return;
    }
    let owns = owns(admin, guard).await;
    if guard.is_lost() || Instant::now() >= deadline {
        return;
    }
    let mut history = history.lock().unwrap();
    let asked = history.beliefs[id].asked;
    if history.beliefs[id].until.is_some()
        || history
            .deletions
            .iter()
            .any(|(_, done)| done.is_none_or(|done| done >= asked))
    {
        return;
    }
    match owns {
        true => history.agreed += 1,
        false => {
            let line = format!(
                "guard {id} ({}) believes it holds the lock; the store says it does not",
                guard.owner()
            );
            history.disagreements.push(line);
        }
    }
}
