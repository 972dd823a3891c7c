//! What an instance answered without a write to Redis, and what it hears.
//!
//! Answers from a sold-out mark, `unknown` answers while Redis was away,
//! and the scripted variants' answers to requests without an id are
//! counted here and added to the ledger every second, and at once when
//! someone reads a state ([`Seller::flush_everywhere`]). The listener's
//! announcements (a reset, a unit given back, a chaos arming, a call to
//! count in) are acted on here too.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use super::Seller;
use crate::knobs::Sku;
use crate::ledger;
use crate::lock::Heard;
use crate::section::nothing_sent;
use crate::store::Keys;
use crate::timeline;

/// Answers an instance gave without writing them to Redis, and the
/// critical sections it ran, not yet on the timeline.
#[derive(Clone, Debug, Default)]
pub(super) struct Local {
    pub(super) unknown: u64,
    /// Every such answer: its share of the SKU's answers (`served`).
    pub(super) served: u64,
    /// Of these, the buyers refused from a sold-out mark.
    pub(super) mark_refusals: u64,
    /// Replays and busy answers of the variants that count nothing in
    /// Redis as they answer (the database's).
    pub(super) replays: u64,
    pub(super) busy: u64,
    /// The last [`timeline::HELD`] at most.
    pub(super) sections: VecDeque<timeline::Section>,
}

impl Local {
    pub(super) fn keep(&mut self, section: timeline::Section) {
        if self.sections.len() >= timeline::HELD {
            self.sections.pop_front();
        }
        self.sections.push_back(section);
    }
}

/// A count-in that was never sent, back as answers to count.
fn local_of(count: ledger::CountIn) -> Local {
    Local {
        unknown: count.unknown,
        served: count.served,
        mark_refusals: count.mark_refusals,
        replays: count.replays,
        busy: count.busy,
        sections: count.sections.into(),
    }
}

/// Where a state read asks every instance to count its answers in now
/// (the message: a nonce), and where each says it has (the same nonce).
pub const FLUSH_CHANNEL: &str = "stocklock:flush";
pub const FLUSHED_CHANNEL: &str = "stocklock:flushed";

/// The channels an instance's listener hears besides lock releases.
pub const CHANNELS: &[&str] = &[
    ledger::RESET_CHANNEL,
    crate::marks::GIVEN_BACK_CHANNEL,
    FLUSH_CHANNEL,
    FLUSHED_CHANNEL,
    crate::chaos::ARMED_CHANNEL,
];

/// Rounds of [`Seller::flush_everywhere`]: how many began, and the number
/// of the last one done (a round's number is the count begun with it) with
/// whether every instance counted in during it.
#[derive(Default)]
pub(super) struct FlushRounds {
    started: AtomicU64,
    done: tokio::sync::Mutex<(u64, bool)>,
    /// Held by a count from taking the answers to its last write: a count
    /// that found nothing left to take must still wait for the one that
    /// took them, or a state read would go ahead without them. It holds
    /// the count-ins sent whose answer never came, by SKU: each is sent
    /// again as it was, and nothing newer of its SKU goes before it.
    counting: tokio::sync::Mutex<HashMap<Sku, ledger::CountIn>>,
    /// This process's counter (`instance:nonce`) and the number of its
    /// last count-in: the ledger applies each number once.
    counter: std::sync::OnceLock<String>,
    numbers: AtomicU64,
}

/// How long a state read waits for the instances to count their answers in.
const FLUSH_WAIT: Duration = Duration::from_secs(1);

impl Seller {
    pub(super) fn count_local(&self, sku: &Sku, count: impl FnOnce(&mut Local)) {
        let mut local = self.local.lock().unwrap_or_else(PoisonError::into_inner);
        // The SKU's key is cloned only the first time in a second.
        match local.get_mut(sku) {
            Some(entry) => count(entry),
            None => count(local.entry(sku.clone()).or_default()),
        }
    }

    /// Adds the answers given without Redis so far to their SKUs' ledgers,
    /// once Redis answers. Those left uncounted are tried again next time.
    /// Returns once every answer given before the call was written or
    /// failed to be, whichever count (this one or one already under way)
    /// took it.
    pub async fn flush_local(&self) {
        let mut in_doubt = self.flush_rounds.counting.lock().await;
        let pending: Vec<(Sku, Local)> = self
            .local
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .collect();
        if pending.is_empty() && in_doubt.is_empty() {
            return;
        }
        let mut left = Vec::new();
        let Ok(mut conn) = self.store.conn().await else {
            self.keep_local(pending);
            return;
        };
        let counter = self
            .flush_rounds
            .counter
            .get_or_init(|| format!("{}:{}", self.instance, uuid::Uuid::new_v4().simple()));
        // First the count-ins in doubt, each as it was: applied now, or
        // found applied before (their first send ran late).
        let doubtful: Vec<Sku> = in_doubt.keys().cloned().collect();
        for sku in doubtful {
            let keys = Keys::new(&sku);
            let sent = ledger::count_in(&mut conn, &keys, &self.instance, counter, &in_doubt[&sku]);
            if sent.await.is_ok() {
                in_doubt.remove(&sku);
            }
        }
        for (sku, n) in pending {
            if in_doubt.contains_key(&sku) {
                // Waits for the count-in before it.
                left.push((sku, n));
                continue;
            }
            let count = ledger::CountIn {
                number: self.flush_rounds.numbers.fetch_add(1, Ordering::Relaxed) + 1,
                unknown: n.unknown,
                served: n.served,
                mark_refusals: n.mark_refusals,
                replays: n.replays,
                busy: n.busy,
                sections: Vec::from(n.sections),
            };
            match ledger::count_in(&mut conn, &Keys::new(&sku), &self.instance, counter, &count)
                .await
            {
                Ok(_) => {}
                // Not sent: nothing counted; it joins what came meanwhile.
                Err(err) if nothing_sent(&err) => left.push((sku, local_of(count))),
                Err(_) => {
                    in_doubt.insert(sku, count);
                }
            }
        }
        self.keep_local(left);
    }

    /// Puts back answers and sections not counted in, before whatever
    /// came meanwhile.
    fn keep_local(&self, left: Vec<(Sku, Local)>) {
        let mut local = self.local.lock().unwrap_or_else(PoisonError::into_inner);
        for (sku, n) in left {
            let entry = local.entry(sku).or_default();
            entry.unknown += n.unknown;
            entry.served += n.served;
            entry.mark_refusals += n.mark_refusals;
            entry.replays += n.replays;
            entry.busy += n.busy;
            // Older than whatever came meanwhile.
            let newer = std::mem::replace(&mut entry.sections, n.sections);
            for section in newer {
                entry.keep(section);
            }
        }
    }

    /// Counts the answers given without Redis every second, for as long as
    /// the task runs; and after a second without a request that followed
    /// some, hands the memory the burst freed back to the kernel.
    pub fn keep_counting_local(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let seller = self.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(1));
            let (mut seen, mut trimmed) = (0, 0);
            loop {
                every.tick().await;
                seller.flush_local().await;
                let now = seller.requests.load(Ordering::Relaxed);
                if now == seen && now != trimmed {
                    crate::os::release_freed_memory();
                    trimmed = now;
                }
                seen = now;
            }
        })
    }

    /// Acts on what the listener hears: a reset or a give-back drops the
    /// SKU's marks, a lost subscription all of them (a reset may have gone
    /// unheard), an arming of chaos faults makes sections look for them,
    /// and a state read's call to count in is answered once counted (after
    /// every message heard before it: one subscription delivers in order).
    pub fn listen_to_announcements(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let seller = self.clone();
        let mut heard = self.wakeups.heard();
        tokio::spawn(async move {
            loop {
                match heard.recv().await {
                    Ok(Heard::Message { channel, message }) => match channel.as_str() {
                        ledger::RESET_CHANNEL | crate::marks::GIVEN_BACK_CHANNEL => {
                            match Sku::parse(&message) {
                                Ok(sku) => seller.marks.reset(&sku),
                                Err(_) => seller.marks.forget_all(),
                            }
                        }
                        crate::chaos::ARMED_CHANNEL => seller.chaos.heard_armed(),
                        FLUSH_CHANNEL => {
                            seller.flush_local().await;
                            if let Err(err) =
                                seller.wakeups.publish(FLUSHED_CHANNEL, &message).await
                            {
                                tracing::debug!(%err, "could not say the answers are counted");
                            }
                        }
                        _ => {}
                    },
                    Ok(Heard::Lost) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        seller.marks.forget_all();
                        seller.chaos.heard_armed();
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        })
    }

    /// Before a state is read: every instance counts the answers it gave
    /// without Redis into the ledger, and this waits (a second at most)
    /// until all that heard the call said so. This instance's own are
    /// counted first, so that without a listener (an instance driven
    /// in-process) they are counted all the same.
    ///
    /// Readers that come together share one round: a round that began
    /// after a reader arrived counted every answer given before it, so the
    /// reader waits for that one instead of starting its own.
    ///
    /// Returns whether every instance counted in: `false` when one that
    /// heard the call did not say so within the second (frozen, or slow
    /// under load), or when the call could not be made (this instance's
    /// listener is not subscribed). What such an instance holds is then
    /// missing from the read, and comes with its next count, within a
    /// second of its coming back.
    pub async fn flush_everywhere(&self) -> bool {
        let arrived = self.flush_rounds.started.load(Ordering::Acquire);
        let mut done = self.flush_rounds.done.lock().await;
        if done.0 > arrived {
            return done.1;
        }
        let round = self.flush_rounds.started.fetch_add(1, Ordering::AcqRel) + 1;
        let counted_in = self.flush_round().await;
        *done = (round, counted_in);
        counted_in
    }

    async fn flush_round(&self) -> bool {
        self.flush_local().await;
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let mut heard = self.wakeups.heard();
        let Ok(listeners) = self.wakeups.publish(FLUSH_CHANNEL, &nonce).await else {
            return false;
        };
        let all_counted = async {
            let mut acks = 0;
            while acks < listeners {
                match heard.recv().await {
                    Ok(Heard::Message { channel, message })
                        if channel == FLUSHED_CHANNEL && message == nonce =>
                    {
                        acks += 1
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return false,
                    _ => {}
                }
            }
            true
        };
        let counted_in = tokio::time::timeout(FLUSH_WAIT, all_counted)
            .await
            .unwrap_or(false);
        if !counted_in {
            tracing::warn!("not every instance counted its answers in within a second");
        }
        counted_in
    }
}
