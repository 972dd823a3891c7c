//! The lanes of `lua-batch`: the queue of one SKU at an instance, its
//! buyers in queue order and whether a driver is sending its batches.

use std::sync::{Mutex, PoisonError};

use tokio::sync::oneshot;

use crate::store::StoreError;

/// One call's word for one buyer: its seven numbers, or why there are none.
pub(super) type Reply = Result<Vec<i64>, StoreError>;

/// A buyer waiting in a lane: its request id and where its reply goes.
pub(super) struct Buyer {
    pub(super) request_id: String,
    pub(super) reply: oneshot::Sender<Reply>,
}

/// The queue of one SKU at this instance.
#[derive(Default)]
pub(super) struct Lane {
    state: Mutex<LaneState>,
}

#[derive(Default)]
pub(super) struct LaneState {
    /// A driver is sending this lane's batches.
    pub(super) in_flight: bool,
    pub(super) waiting: Vec<Buyer>,
}

impl Lane {
    pub(super) fn state(&self) -> std::sync::MutexGuard<'_, LaneState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `buyer`; true when no driver runs, so the caller must start one.
    pub(super) fn push(&self, buyer: Buyer) -> bool {
        let mut state = self.state();
        state.waiting.push(buyer);
        !std::mem::replace(&mut state.in_flight, true)
    }

    /// The next batch (up to `max`, in queue order); none, and the lane
    /// idle, when nobody waits.
    pub(super) fn next(&self, max: usize) -> Option<Vec<Buyer>> {
        let mut state = self.state();
        if state.waiting.is_empty() {
            state.in_flight = false;
            return None;
        }
        let n = state.waiting.len().min(max);
        Some(state.waiting.drain(..n).collect())
    }
}
