//! Runs started from the page: the load generator's engine, run by the
//! instance that took the request, through the stack's public URL (nginx),
//! with its progress in Redis so that every instance's board shows it.
//!
//! One run at a time, stack-wide: the run holds a lease lock (our own
//! [`LeaseLock`] with a [`Watchdog`]) for as long as it lasts, so a second
//! "race all" is refused while one is under way, and an instance that dies
//! mid-run frees the slot after one lease.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::{HeaderMap, StatusCode};
use futures_util::future::join_all;
use redis::AsyncCommands;

use super::Dashboard;
use crate::knobs::{InputError, MAX_LEASE_MS, MAX_WAIT_MS, MAX_WORK_MS, parse_stock};
use crate::load::engine::Progress;
use crate::load::{LoadConfig, Runner};
use crate::lock::{LeaseLock, OwnerId, Watchdog};
use crate::store::Store;
use crate::variants::Variant;
use crate::web::AppError;
use crate::wire::{RunRequest, RunStatus, VariantInfo};

/// The run's status as JSON.
pub const STATUS_KEY: &str = "stocklock:run";
/// The lease lock that makes runs one at a time.
const LOCK_KEY: &str = "stocklock:run:lock";
const LOCK_LEASE: Duration = Duration::from_secs(5);
/// Bounds of a run from the page.
const MAX_REQUESTS: u64 = 100_000;
const MAX_CONCURRENCY: usize = 512;

pub(super) fn bounded(field: &str, value: u64, min: u64, max: u64) -> Result<u64, InputError> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(InputError::new(
            field,
            format!("must be from {min} to {max}, got {value}"),
        ))
    }
}

/// Checks a run request and resolves its variants.
pub(super) fn validate(request: &RunRequest) -> Result<Vec<VariantInfo>, InputError> {
    let variants: Vec<Variant> = if request.variants.is_empty() {
        Variant::ALL.to_vec()
    } else {
        request
            .variants
            .iter()
            .map(|name| {
                crate::args::parse_variant(name)
                    .map_err(|detail| InputError::new("variants", detail))
            })
            .collect::<Result<_, _>>()?
    };
    parse_stock(request.stock)?;
    bounded("requests", request.requests, 1, MAX_REQUESTS)?;
    bounded(
        "concurrency",
        request.concurrency as u64,
        1,
        MAX_CONCURRENCY as u64,
    )?;
    if let Some(ms) = request.work_ms {
        bounded("work_ms", ms, 0, MAX_WORK_MS)?;
    }
    if let Some(ms) = request.lease_ms {
        bounded("lease_ms", ms, 1, MAX_LEASE_MS)?;
    }
    if let Some(ms) = request.wait_ms {
        bounded("wait_ms", ms, 0, MAX_WAIT_MS)?;
    }
    Ok(variants.into_iter().map(Variant::info).collect())
}

async fn write_status(store: &Store, key: &str, status: &RunStatus) {
    let Ok(json) = serde_json::to_string(status) else {
        return;
    };
    if let Ok(mut conn) = store.conn().await {
        // Kept an hour after the last update, for the page to show.
        let _: Result<(), _> = conn.set_ex(key, json, 3600).await;
    }
}

/// Where a classroom seat's run is shown: its own status.
pub fn seat_status_key(seat: &str) -> String {
    format!("{STATUS_KEY}:seat:{seat}")
}

/// Bounds of a seat's run: each variant's buyers, and at once.
pub(super) const SEAT_REQUESTS: u64 = 1_000;
pub(super) const SEAT_CONCURRENCY: usize = 64;

/// `POST /api/admin/run`: starts a run and answers 202 with its status.
pub async fn start(
    State(state): State<Dashboard>,
    headers: HeaderMap,
    body: Result<Json<RunRequest>, JsonRejection>,
) -> Result<(StatusCode, Json<RunStatus>), AppError> {
    state.authorize(&headers)?;
    let Json(request) = body?;
    let variants = validate(&request)?;

    let store = state.store().clone();
    let owner = OwnerId::new(state.instance());
    let lock = LeaseLock::new(store.conn().await?, LOCK_KEY, state.wakeups().clone());
    if !lock.try_lock(&owner, LOCK_LEASE).await? {
        return Err(AppError::Conflict(
            "a run is already in progress; wait for it to finish".to_owned(),
        ));
    }
    let dog = Watchdog::start(lock.clone(), owner.clone(), LOCK_LEASE);
    let config = load_config(&state, &request, "");
    let run = Run {
        store,
        key: STATUS_KEY.to_owned(),
        status: running(owner.to_string(), &variants, &request),
    };
    let answer = run.status.clone();
    tokio::spawn(async move {
        run.go(&config, &variants).await;
        dog.stop();
        let _ = lock.unlock(&owner).await;
    });
    Ok((StatusCode::ACCEPTED, Json(answer)))
}

/// How long a seat's run may take (its claim expires then too).
pub(super) const SEAT_RUN_LIMIT: Duration = Duration::from_secs(120);

/// The load run `request` asks for, on the SKUs named `prefix` and each
/// variant (empty: the variants' own).
pub(super) fn load_config(state: &Dashboard, request: &RunRequest, prefix: &str) -> LoadConfig {
    LoadConfig {
        variants: Vec::new(),
        sku_prefix: prefix.to_owned(),
        stock: Some(request.stock),
        requests: Some(request.requests),
        concurrency: request.concurrency,
        work_ms: request.work_ms,
        lease_ms: request.lease_ms,
        wait_ms: request.wait_ms,
        ..LoadConfig::new(state.public_url(), Some(state.admin_token().to_owned()))
    }
}

/// A run's first status.
pub(super) fn running(id: String, variants: &[VariantInfo], request: &RunRequest) -> RunStatus {
    RunStatus {
        id,
        state: "running".to_owned(),
        variants: variants.iter().map(|v| v.name.clone()).collect(),
        done: 0,
        total: request.requests * variants.len() as u64,
        reports: Vec::new(),
        error: None,
    }
}

/// A run under way: where its status is written, and the status.
pub(super) struct Run {
    pub(super) store: Store,
    pub(super) key: String,
    pub(super) status: RunStatus,
}

impl Run {
    /// Plays the run to its end, its status written as it goes.
    pub(super) async fn go(mut self, config: &LoadConfig, variants: &[VariantInfo]) {
        let config = LoadConfig {
            variants: self.status.variants.clone(),
            ..config.clone()
        };
        write_status(&self.store, &self.key, &self.status).await;
        match execute(&self.store, &self.key, &config, variants, &mut self.status).await {
            Ok(reports) => {
                self.status.state = "done".to_owned();
                self.status.reports = reports;
            }
            Err(err) => {
                tracing::warn!("run {} failed: {err:#}", self.status.id);
                self.status.state = "failed".to_owned();
                self.status.error = Some(format!("{err:#}"));
            }
        }
        write_status(&self.store, &self.key, &self.status).await;
    }
}

/// Runs every variant at once, each on its own SKU, publishing progress.
async fn execute(
    store: &Store,
    key: &str,
    config: &LoadConfig,
    variants: &[VariantInfo],
    status: &mut RunStatus,
) -> anyhow::Result<Vec<crate::wire::RunReport>> {
    // Every request's answer recorded, each run judged by the history
    // checker too (its verdict shown beside the ledger's).
    let runner = Runner::connect(config.clone())
        .await?
        .recording(crate::history::Recorder::new());
    let progress: Vec<Progress> = variants.iter().map(|_| Progress::default()).collect();
    let runs = join_all(
        variants
            .iter()
            .zip(&progress)
            .map(|(info, progress)| runner.run_variant(info, progress)),
    );
    tokio::pin!(runs);
    let mut every = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            results = &mut runs => {
                status.done = progress.iter().map(Progress::done).sum();
                return results.into_iter().collect();
            }
            _ = every.tick() => {
                status.done = progress.iter().map(Progress::done).sum();
                write_status(store, key, status).await;
            }
        }
    }
}
