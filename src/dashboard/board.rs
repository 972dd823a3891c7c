//! The board every instance serves: each variant's SKU (the SKU is the
//! variant's name), each instance's heartbeat, the run in progress and the
//! scenarios run from the cards, all read from Redis, so that any instance
//! behind nginx draws the same board.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use redis::AsyncCommands;
use tokio::sync::watch;

use super::{Dashboard, labs, runs};
use crate::knobs::Sku;
use crate::ledger;
use crate::store::{Keys, Store, StoreError};
use crate::variants::Variant;
use crate::web::AppError;
use crate::wire::{Board, InstanceStatus, RunStatus};

/// The hash of instance → heartbeat (`{"pid", "requests", "at_ms"}`).
const INSTANCES_KEY: &str = "stocklock:instances";
/// How often an instance says it is alive.
const HEARTBEAT: Duration = Duration::from_secs(1);
/// A heartbeat older than this is an instance that is gone.
const HEALTHY_WITHIN_MS: u64 = 3_000;
/// How often the board is read while someone watches.
const BOARD_EVERY: Duration = Duration::from_millis(250);

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Heartbeat {
    pid: u32,
    requests: u64,
    at_ms: u64,
    /// Where this instance listens (to reach it without nginx).
    #[serde(default)]
    url: String,
}

/// Writes this instance's heartbeat every second, for as long as the task runs.
pub(super) fn heartbeat(
    store: Store,
    instance: String,
    url: String,
    requests: Arc<std::sync::atomic::AtomicU64>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(HEARTBEAT);
        loop {
            every.tick().await;
            let beat = Heartbeat {
                pid: std::process::id(),
                requests: requests.load(std::sync::atomic::Ordering::Relaxed),
                at_ms: now_ms(),
                url: url.clone(),
            };
            let Ok(json) = serde_json::to_string(&beat) else {
                continue;
            };
            if let Ok(mut conn) = store.conn().await {
                let _: Result<i64, _> = conn.hset(INSTANCES_KEY, &instance, json).await;
            }
        }
    })
}

/// Whose board: the stack's (every variant's own SKU, the teacher's run
/// and scenarios), or a classroom seat's (its own SKUs and run).
pub(super) enum Whose<'a> {
    Stack,
    Seat(&'a str),
}

/// Reads the whole board: every variant's SKU, the instances, the run.
/// A lock that lives outside the main Redis (Redlock, etcd, ZooKeeper) is
/// read from its own store.
pub(super) async fn read_board(
    store: &Store,
    stores: &crate::lock::LockStores,
    whose: Whose<'_>,
) -> Result<Board, StoreError> {
    let (prefix, run_key) = match whose {
        Whose::Stack => (String::new(), runs::STATUS_KEY.to_owned()),
        Whose::Seat(id) => (
            crate::classroom::jobs::sku_prefix(id),
            runs::seat_status_key(id),
        ),
    };
    let mut conn = store.conn().await?;
    // The run first: when it says done, every variant read after it is final.
    let run: Option<String> = conn.get(run_key).await?;
    let run: Option<RunStatus> = run.and_then(|json| serde_json::from_str(&json).ok());
    let mut variants = Vec::with_capacity(Variant::ALL.len());
    for variant in Variant::ALL {
        // (A seat's id is ours, twelve hex digits, signed: its SKUs parse.)
        let sku = Sku::parse(&format!("{prefix}{}", variant.name()))
            .expect("variant names and seat prefixes make valid SKUs");
        let keys = Keys::new(&sku);
        let mut state = ledger::snapshot(&mut conn, &keys, sku.as_str()).await?;
        if let (true, Some(pool)) = (variant.stock_in_postgres(), &stores.postgres) {
            // Its stock is the database's: a database away leaves the card
            // Redis's counts, as a Redis away leaves the board unread.
            if let Ok(client) = pool.get().await {
                let _ = crate::pgstock::overlay(&**client, &mut state).await;
            }
        }
        if let Some(lock) = super::locks::read(variant, &keys, stores).await {
            state.lock = lock;
        }
        variants.push(state);
    }
    let beats: Vec<(String, String)> = conn.hgetall(INSTANCES_KEY).await?;
    let now = now_ms();
    let instances = beats
        .into_iter()
        .filter_map(|(name, json)| {
            let beat: Heartbeat = serde_json::from_str(&json).ok()?;
            let age_ms = now.saturating_sub(beat.at_ms);
            Some(InstanceStatus {
                name,
                pid: beat.pid,
                requests: beat.requests,
                url: beat.url,
                age_ms,
                healthy: age_ms < HEALTHY_WITHIN_MS,
            })
        })
        // An instance gone for a minute is dropped from the panel.
        .filter(|i| i.age_ms < 60_000)
        .collect::<Vec<_>>();
    let mut instances = instances;
    instances.sort_by(|a, b| a.name.cmp(&b.name));
    // A card's scenarios are the teacher's: a seat's board has none.
    let labs = match whose {
        Whose::Stack => serde_json::to_value(labs::read(store).await?).unwrap_or_default(),
        Whose::Seat(_) => serde_json::Value::Object(Default::default()),
    };
    Ok(Board {
        variants,
        instances,
        run,
        labs,
    })
}

/// The board as this instance last read it, shared by every event stream
/// of the instance: one reader however many pages watch.
#[derive(Clone)]
pub(super) struct BoardFeed(watch::Sender<Option<Arc<String>>>);

impl Default for BoardFeed {
    fn default() -> Self {
        Self(watch::Sender::new(None))
    }
}

impl BoardFeed {
    /// Reads the board every 250 ms while at least one page watches, and
    /// publishes it when it changed.
    pub(super) fn run(
        &self,
        store: Store,
        stores: crate::lock::LockStores,
    ) -> tokio::task::JoinHandle<()> {
        let feed = self.0.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(BOARD_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                if feed.receiver_count() == 0 {
                    continue; // nobody watches: read nothing
                }
                let json = match read_board(&store, &stores, Whose::Stack).await {
                    Ok(board) => serde_json::to_string(&board).ok(),
                    Err(err) => {
                        tracing::debug!(%err, "board unavailable");
                        None
                    }
                };
                if let Some(json) = json {
                    feed.send_if_modified(|current| {
                        if current.as_deref().map(String::as_str) == Some(json.as_str()) {
                            false
                        } else {
                            *current = Some(Arc::new(json));
                            true
                        }
                    });
                }
            }
        })
    }
}

/// `GET /api/events`: the board as server-sent events (`event: board`),
/// sent whenever it changes, at most four times a second.
pub(super) async fn events(
    State(state): State<Dashboard>,
) -> Sse<impl Stream<Item = Result<Event, std::convert::Infallible>>> {
    let mut rx = state.board_feed().0.subscribe();
    rx.mark_changed();
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        loop {
            rx.changed().await.ok()?;
            let board = rx.borrow_and_update().clone();
            if let Some(board) = board {
                return Some((Ok(Event::default().event("board").data(board.as_str())), rx));
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// `GET /api/board`: the same board, for polling; a classroom seat's own
/// (its cookie), which the page of a seat polls instead of the events.
pub(super) async fn board(
    State(state): State<Dashboard>,
    headers: axum::http::HeaderMap,
) -> Result<axum::Json<Board>, AppError> {
    let seat = state.seat_of(&headers).await;
    let whose = seat.as_ref().map_or(Whose::Stack, |s| Whose::Seat(&s.id));
    Ok(axum::Json(
        read_board(state.store(), state.stores(), whose).await?,
    ))
}
