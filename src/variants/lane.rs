//! The lanes of the batching variants (`lua-batch`, `pg-batch`): the queue
//! of one SKU at an instance, its buyers in queue order, and whether a
//! driver is sending its batches.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The queue of one SKU at this instance, of buyers `B`.
pub(super) struct Lane<B> {
    state: Mutex<LaneState<B>>,
}

impl<B> Default for Lane<B> {
    fn default() -> Self {
        Self {
            state: Mutex::new(LaneState {
                in_flight: false,
                waiting: Vec::new(),
            }),
        }
    }
}

pub(super) struct LaneState<B> {
    /// A driver is sending this lane's batches.
    pub(super) in_flight: bool,
    pub(super) waiting: Vec<B>,
}

impl<B> Lane<B> {
    pub(super) fn state(&self) -> std::sync::MutexGuard<'_, LaneState<B>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `buyer`; true when no driver runs, so the caller must start one.
    pub(super) fn push(&self, buyer: B) -> bool {
        let mut state = self.state();
        state.waiting.push(buyer);
        !std::mem::replace(&mut state.in_flight, true)
    }

    /// The next batch (up to `max`, in queue order); none, and the lane
    /// idle, when nobody waits.
    pub(super) fn next(&self, max: usize) -> Option<Vec<B>> {
        let mut state = self.state();
        if state.waiting.is_empty() {
            state.in_flight = false;
            return None;
        }
        let n = state.waiting.len().min(max);
        Some(state.waiting.drain(..n).collect())
    }
}

/// A driver's hold on its lane, from its start to its end. A driver that
/// ends early (a panic, its task dropped) must not leave the lane "in
/// flight" with nobody driving it, or its queue waiting for ever: dropped
/// before [`Driving::finished`], it lets the next buyer start a driver and
/// drops the queued buyers (whose reply channels close: each hears
/// `unknown`, as do the buyers of the batch in hand).
pub(super) struct Driving<B>(pub(super) Arc<Lane<B>>, bool);

impl<B> Driving<B> {
    pub(super) fn of(lane: Arc<Lane<B>>) -> Self {
        Self(lane, false)
    }

    /// The lane emptied the normal way: nothing to undo.
    pub(super) fn finished(mut self) {
        self.1 = true;
    }
}

impl<B> Drop for Driving<B> {
    fn drop(&mut self) {
        if !self.1 {
            let mut state = self.0.state();
            state.in_flight = false;
            state.waiting.clear();
        }
    }
}

/// How many SKUs' lanes an instance keeps; past it, the idle ones go.
const LANES_KEPT: usize = 1024;

/// An instance's lanes, one per SKU, each with what its batches need
/// beside it (`T`).
pub(super) struct Lanes<B, T> {
    lanes: Mutex<HashMap<String, LaneWith<B, T>>>,
}

/// A SKU's lane, and what goes with it.
type LaneWith<B, T> = (Arc<Lane<B>>, T);

impl<B, T> Default for Lanes<B, T> {
    fn default() -> Self {
        Self {
            lanes: Mutex::new(HashMap::new()),
        }
    }
}

impl<B, T: Clone> Lanes<B, T> {
    /// The lane of `sku` and what goes with it, made (`with`) at the SKU's
    /// first buyer. Past [`LANES_KEPT`] SKUs, those idle are forgotten.
    pub(super) fn of(&self, sku: &str, with: impl FnOnce() -> T) -> LaneWith<B, T> {
        let mut lanes = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((lane, it)) = lanes.get(sku) {
            return (lane.clone(), it.clone());
        }
        if lanes.len() >= LANES_KEPT {
            lanes.retain(|_, (lane, _)| lane.state().in_flight);
        }
        let entry = (Arc::new(Lane::default()), with());
        lanes.insert(sku.to_owned(), entry.clone());
        entry
    }
}
