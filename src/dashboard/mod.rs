//! The live dashboard: the page, its assets, the board every instance
//! serves, the runs started from the page, and the model checker's verdict
//! on one cell of the lab (`/api/check`, for the lessons and the scenarios),
//! and a running soak followed (`/soak`).
//!
//! Everything the page shows is read from Redis, so any instance behind
//! nginx draws the same board: each variant's SKU (the SKU is the variant's
//! name), each instance's heartbeat, and the run in progress.
//!
//! The dashboard owns its routes ([`router`]); the instance's router merges
//! them. It is handed the parts of the instance it uses ([`Parts`]), so it
//! never reaches into the API's state.

mod board;
mod classroom;
pub mod labs;
mod lessons;
mod locks;
mod models;
mod page;
pub use page::code_spans;
pub mod runs;
mod seat;
mod soak;
mod step;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use metrics_exporter_prometheus::PrometheusHandle;

use self::board::BoardFeed;
use crate::lock::{LockStores, Wakeups};
use crate::store::Store;
use crate::web::{AdminToken, AppError};

/// The parts of one instance the dashboard reads and acts on, handed over
/// by the instance's state.
pub struct Parts {
    pub store: Store,
    /// The name the page shows, the heartbeat announces and runs are owned by.
    pub instance: String,
    /// This instance's own address, announced in its heartbeat.
    pub own_url: String,
    /// The stack's URL (nginx), where runs started from the page send their load.
    pub public_url: String,
    /// Lets in the page's admin actions (runs and scenarios).
    pub admin: AdminToken,
    /// The waiters of this process: the lock that keeps runs one at a time waits with them.
    pub wakeups: Wakeups,
    /// Redlock's nodes, if the instance has any: its card's lock is read there.
    pub stores: LockStores,
    /// Requests this instance answered, announced in its heartbeat.
    pub requests: Arc<AtomicU64>,
    pub metrics: &'static PrometheusHandle,
    /// Chaos mode: the lessons' experiments need it.
    pub chaos: bool,
    /// The instance has the orders' database: the order variants' cards
    /// read their orders (without it, `/api/orders` can only say 503).
    pub orders: bool,
}

/// What the dashboard's handlers and tasks share. Cheap to clone.
#[derive(Clone)]
pub struct Dashboard(Arc<Shared>);

struct Shared {
    parts: Parts,
    /// The board as this instance last read it, for every page that watches.
    board: BoardFeed,
}

impl Dashboard {
    pub fn new(parts: Parts) -> Self {
        Self(Arc::new(Shared {
            parts,
            board: BoardFeed::default(),
        }))
    }

    /// Starts the tasks that keep the dashboard live: the heartbeat and the
    /// board reader. They stop when the returned handles are aborted.
    pub fn start_background(&self) -> Vec<tokio::task::JoinHandle<()>> {
        let parts = &self.0.parts;
        vec![
            board::heartbeat(
                parts.store.clone(),
                parts.instance.clone(),
                parts.own_url.clone(),
                parts.requests.clone(),
            ),
            self.0.board.run(parts.store.clone(), parts.stores.clone()),
        ]
    }

    fn store(&self) -> &Store {
        &self.0.parts.store
    }

    fn instance(&self) -> &str {
        &self.0.parts.instance
    }

    fn public_url(&self) -> &str {
        &self.0.parts.public_url
    }

    fn admin_token(&self) -> &str {
        self.0.parts.admin.as_str()
    }

    fn wakeups(&self) -> &Wakeups {
        &self.0.parts.wakeups
    }

    fn stores(&self) -> &LockStores {
        &self.0.parts.stores
    }

    fn metrics(&self) -> &PrometheusHandle {
        self.0.parts.metrics
    }

    fn board_feed(&self) -> &BoardFeed {
        &self.0.board
    }

    /// Lets an admin action in, or refuses it (401).
    fn authorize(&self, headers: &HeaderMap) -> Result<(), AppError> {
        self.0.parts.admin.authorize(headers)
    }
}

/// The dashboard's routes: the page and its assets, the board (polled and
/// as events), the metrics, and the runs and scenarios started from the page.
pub fn router(dashboard: Dashboard) -> Router {
    Router::new()
        .route("/", get(page::index))
        .route("/lessons", get(lessons::page))
        .route("/timeline", get(page::timeline))
        .route("/static/{asset}", get(page::asset_named))
        .route("/favicon.ico", get(page::favicon))
        .route("/api/board", get(board::board))
        .route("/api/events", get(board::events))
        .route("/api/admin/run", post(runs::start))
        .route("/api/seat/run", post(seat::seat_start))
        .route("/api/seat/reset", post(seat::seat_reset))
        .route("/api/admin/lab", post(labs::start))
        .route("/api/lessons", get(lessons::statuses))
        .route("/api/check", get(models::cell))
        .route("/api/admin/lessons/{id}", post(lessons::run))
        .route("/api/lessons/{id}", post(lessons::run))
        .route("/step", get(step::page))
        .route("/join", get(classroom::join))
        .route("/classroom", get(classroom::page))
        .route(
            "/api/admin/classroom",
            get(classroom::board).post(classroom::switch),
        )
        .route("/api/admin/step", post(step::start))
        .route(
            "/api/admin/step/anyway",
            get(step::any_way_status).post(step::any_way),
        )
        .route("/api/admin/step/{id}", get(step::read).post(step::take))
        // The same for a classroom's seats, outside `/api/admin/` (which
        // nginx keeps to the teacher's machine): a seat's cookie or the
        // admin token.
        .route("/api/step", post(step::start))
        .route("/api/step/{id}", get(step::read).post(step::take))
        .route("/soak", get(soak::page))
        .route("/api/soak", get(soak::status))
        .route("/metrics", get(page::metrics))
        .with_state(dashboard)
}
