//! What an instance tells anyone who asks: a SKU's state, the variants,
//! and whether it is ready.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::{AppState, Pairs};
use crate::knobs::{InputError, Sku};
use crate::ledger;
use crate::store::Keys;
use crate::variants::Variant;
use crate::web::AppError;
use crate::wire::{Health, StateView, VariantInfo};

/// Reads `?sku=` (the only parameter) of the state endpoint.
fn sku_only(pairs: &Pairs) -> Result<Sku, AppError> {
    let mut sku = None;
    for (name, value) in pairs {
        match name.as_str() {
            "sku" if sku.is_none() => sku = Some(Sku::parse(value)?),
            "sku" => return Err(InputError::new("sku", "given more than once").into()),
            other => {
                return Err(
                    InputError::new(format!("{other:?}"), "unknown parameter; known: sku").into(),
                );
            }
        }
    }
    Ok(sku.unwrap_or_default())
}

/// `GET /api/state?sku=`: one SKU's ledger, lock and stock, once every
/// instance has counted in the answers it gave without Redis (sold-out
/// marks, unknown outcomes), so that the books balance when read.
pub(super) async fn state_of(
    State(state): State<AppState>,
    query: Result<Query<Pairs>, QueryRejection>,
) -> Result<Json<StateView>, AppError> {
    let sku = sku_only(&query?.0)?;
    state.seller().flush_everywhere().await;
    let mut conn = state.store().conn().await?;
    let snapshot = snapshot(&state, &mut conn, &Keys::new(&sku), &sku).await?;
    let redis_memory = ledger::redis_memory(&mut conn).await;
    Ok(Json(StateView {
        snapshot,
        redis_memory,
    }))
}

/// `sku`'s snapshot: Redis's ledger, with the database's books of its
/// stock when the `pg-*` variants sold from it ([`crate::pgstock::overlay`]).
pub(super) async fn snapshot(
    state: &AppState,
    conn: &mut crate::store::Conn,
    keys: &Keys,
    sku: &Sku,
) -> Result<crate::wire::StateSnapshot, AppError> {
    let mut snapshot = ledger::snapshot(conn, keys, sku.as_str()).await?;
    if let Some(pool) = state.seller().postgres() {
        let unavailable =
            |err: &dyn std::fmt::Display| AppError::DatabaseUnavailable(err.to_string());
        let client = pool.get().await.map_err(|e| unavailable(&e))?;
        crate::pgstock::overlay(&**client, &mut snapshot)
            .await
            .map_err(|e| unavailable(&e))?;
    }
    Ok(snapshot)
}

/// `GET /api/variants`
pub(super) async fn variants() -> Json<Vec<VariantInfo>> {
    Json(Variant::ALL.iter().map(|v| v.info()).collect())
}

/// `GET /healthz`: 200 `ok` once the instance is ready; 503 `starting`
/// until its subscription to lock releases is live (a waiter before that
/// would sleep out the holder's lease instead of being woken). `up` waits
/// for it before putting the instance behind nginx.
pub(super) async fn healthz(State(state): State<AppState>) -> Response {
    let ready = state.wakeups().is_subscribed();
    let health = Health {
        status: if ready { "ok" } else { "starting" }.to_owned(),
        instance: state.instance().to_owned(),
        pid: std::process::id(),
    };
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(health)).into_response()
}
