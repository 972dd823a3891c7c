//! The admin routes of the API: resetting a SKU and chaos actions. Both
//! need the admin token; chaos needs an instance in chaos mode too, and
//! leaves the faults themselves to [`crate::chaos`].

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::HeaderMap;

use super::AppState;
use crate::chaos;
use crate::knobs::{Sku, parse_stock};
use crate::ledger;
use crate::store::Keys;
use crate::web::AppError;
use crate::wire::{ChaosAction, ResetRequest, StateSnapshot};

/// `POST /api/admin/reset`: a SKU's stock, ledger and lock start over (needs the token).
pub(super) async fn reset(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Json<ResetRequest>, JsonRejection>,
) -> Result<Json<StateSnapshot>, AppError> {
    state.authorize(&headers)?;
    let Json(request) = body?;
    let sku = Sku::parse(&request.sku)?;
    let stock = parse_stock(request.stock)?;
    let buckets = crate::knobs::parse_buckets(request.buckets)?;
    let keys = Keys::new(&sku);
    let mut conn = state.store().conn().await?;
    // Answers given without Redis before the reset belong to the old books.
    state.seller().flush_everywhere().await;
    // The pg-* variants' stock of the SKU starts over first: a database
    // that cannot take it refuses the whole reset (503) before Redis is
    // touched, rather than leave the SKU stocked in one store only.
    if let Some(pool) = state.seller().postgres() {
        let unavailable = |err: &dyn std::fmt::Display| {
            AppError::DatabaseUnavailable(format!(
                "the SKU's stock in PostgreSQL could not be reset; nothing was reset: {err}"
            ))
        };
        let client = pool.get().await.map_err(|e| unavailable(&e))?;
        crate::pgstock::reset(&**client, sku.as_str(), stock)
            .await
            .map_err(|e| unavailable(&e))?;
    }
    ledger::reset_sku(&mut conn, &keys, stock, buckets, false).await?;
    if request.timeline == Some(false) {
        ledger::timeline_off(&mut conn, &keys, buckets).await?;
    }
    let detail = format!("stock {stock}");
    crate::timeline::event(&mut conn, "reset", None, Some(sku.as_str()), detail).await;
    tracing::info!(%sku, stock, buckets, "reset");
    Ok(Json(
        ledger::snapshot(&mut conn, &keys, sku.as_str()).await?,
    ))
}

/// `POST /api/admin/chaos`: needs the token, and an instance in chaos mode.
pub(super) async fn chaos_action(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Json<ChaosAction>, JsonRejection>,
) -> Result<Json<serde_json::Value>, AppError> {
    state.authorize(&headers)?;
    if !state.chaos().enabled() {
        return Err(AppError::Forbidden(
            "chaos actions need an instance started with --chaos (stocklock up --chaos)".to_owned(),
        ));
    }
    let Json(action) = body?;
    let mut conn = state.store().conn().await?;
    let done = match &action {
        ChaosAction::CrashAfterAcquire => {
            chaos::arm_crash_after_acquire(&mut conn).await?;
            serde_json::json!({"armed": "crash_after_acquire"})
        }
        ChaosAction::CrashAfterWrite => {
            chaos::arm_crash_after_write(&mut conn).await?;
            serde_json::json!({"armed": "crash_after_write"})
        }
        ChaosAction::ClockSkew { ms } => {
            let skew = crate::knobs::parse_clock_skew(*ms)?;
            state.chaos().set_clock_skew(skew);
            serde_json::json!({"clock_skew_ms": skew, "instance": state.instance()})
        }
        ChaosAction::PauseHolder { ms } => {
            let ms = crate::knobs::parse_ms("ms", &ms.to_string(), 1, crate::knobs::MAX_WORK_MS)?;
            chaos::arm_pause_holder(&mut conn, ms).await?;
            serde_json::json!({"armed": "pause_holder", "ms": ms})
        }
        ChaosAction::LockVanishes { sku } => {
            let sku = Sku::parse(sku)?;
            let deleted = chaos::vanish_lock(&mut conn, &Keys::new(&sku)).await?;
            let detail = if deleted {
                "its lock key deleted"
            } else {
                "no lock to delete"
            };
            crate::timeline::event(
                &mut conn,
                "lock_vanishes",
                None,
                Some(sku.as_str()),
                detail.to_owned(),
            )
            .await;
            serde_json::json!({"deleted": deleted, "sku": sku.as_str()})
        }
        ChaosAction::PauseRedis { .. } | ChaosAction::RestartRedis
            if !state.chaos().redis_control() =>
        {
            return Err(AppError::Forbidden(
                "pausing or restarting Redis needs the Redis that stocklock up started (not --redis-url)".to_owned(),
            ));
        }
        ChaosAction::PauseRedis { ms } => {
            let ms = crate::knobs::parse_ms("ms", &ms.to_string(), 1, crate::knobs::MAX_WORK_MS)?;
            crate::timeline::event(&mut conn, "pause_redis", None, None, format!("{ms} ms")).await;
            chaos::pause_redis(state.store(), Duration::from_millis(ms));
            serde_json::json!({"pausing_redis_ms": ms})
        }
        ChaosAction::RestartRedis => {
            crate::timeline::event(
                &mut conn,
                "restart_redis",
                None,
                None,
                "SHUTDOWN NOSAVE".to_owned(),
            )
            .await;
            chaos::restart_redis(state.store()).await?;
            serde_json::json!({"restarting_redis": true})
        }
        ChaosAction::CrashBeforeEnqueue => {
            chaos::arm_crash_before_enqueue(&mut conn).await?;
            serde_json::json!({"armed": "crash_before_enqueue"})
        }
        ChaosAction::WorkerCrashBeforeAck => {
            chaos::arm_worker_crash_before_ack(&mut conn).await?;
            serde_json::json!({"armed": "worker_crash_before_ack"})
        }
        ChaosAction::LoseCommitAnswer { sql } => {
            let sql = sql.trim();
            if sql.is_empty() || sql.len() > 200 {
                return Err(AppError::Invalid(crate::knobs::InputError::new(
                    "sql",
                    "a piece of the statement whose answer is lost: 1 to 200 characters (e.g. commit)",
                )));
            }
            let cut = relay(&state, "losing a commit's answer")?.cut_after(sql);
            let detail = format!("the next statement with {sql:?}: its answer lost");
            state
                .chaos()
                .record(&mut conn, "lose_commit_answer", None, &detail)
                .await;
            let instance = state.instance().to_owned();
            tokio::spawn(async move {
                if cut.await.is_ok() {
                    tracing::warn!(instance, "a commit's answer was lost on its way back");
                }
            });
            serde_json::json!({"armed": "lose_commit_answer", "sql": sql, "instance": state.instance()})
        }
        ChaosAction::PartitionPostgres { ms } => {
            let ms = crate::knobs::parse_ms("ms", &ms.to_string(), 1, crate::knobs::MAX_WORK_MS)?;
            relay(&state, "a partition from PostgreSQL")?
                .partition(std::time::Duration::from_millis(ms));
            let detail = format!("this instance cut off from PostgreSQL for {ms} ms");
            state
                .chaos()
                .record(&mut conn, "partition_postgres", None, &detail)
                .await;
            serde_json::json!({"partitioned": state.instance(), "ms": ms})
        }
        ChaosAction::Crash => {
            state
                .chaos()
                .record(&mut conn, "crash", None, "the crash action")
                .await;
            chaos::crash_soon();
            serde_json::json!({"crashing": state.instance()})
        }
    };
    if matches!(
        action,
        ChaosAction::CrashAfterAcquire
            | ChaosAction::CrashAfterWrite
            | ChaosAction::PauseHolder { .. }
            | ChaosAction::CrashBeforeEnqueue
            | ChaosAction::WorkerCrashBeforeAck
    ) {
        // Returns once every instance has heard of the arming (its
        // listener hears the arming before this call to count in), so the
        // next section anywhere looks for the fault.
        state.seller().flush_everywhere().await;
    }
    tracing::warn!(?action, "chaos");
    Ok(Json(done))
}

/// This instance's relay to PostgreSQL, which `what` needs.
fn relay<'a>(
    state: &'a AppState,
    what: &str,
) -> Result<&'a crate::up::pg_relay::PgRelay, AppError> {
    state.pg_relay().ok_or_else(|| {
        AppError::Forbidden(format!(
            "{what} needs this instance's relay to PostgreSQL: chaos mode and --postgres-url"
        ))
    })
}
