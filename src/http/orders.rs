//! The orders' routes: a SKU's orders and their reconciliation (a reading
//! shared by the instance's callers for 2 s; read now for the admin token),
//! finding a buyer's order by its request id, paying it, and (admin) an
//! expiry pass.
//! An instance started without `--postgres-url` answers 503 not_configured.
//! Finding and paying take the order's token (`X-Order-Token`, from the
//! sale's answer): ids are sequential, the token is what only the buyer
//! has. Without it, the same 404 as for an order that does not exist.

use std::time::Duration;

use axum::Json;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use serde::Deserialize;

use super::AppState;
use crate::knobs::Sku;
use crate::orders::expiry::{self, Expired, Paid};
use crate::orders::summary::{Books, FRESH_FOR, books};
use crate::orders::{Client, Database};
use crate::web::AppError;
use crate::wire::{ORDER_TOKEN, OrderView, OrdersView};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SkuQuery {
    sku: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FindQuery {
    sku: String,
    request_id: String,
}

fn database(state: &AppState) -> Result<&Database, AppError> {
    state.orders().ok_or_else(|| {
        AppError::NotConfigured(
            "orders are off on this instance: start it with --postgres-url (stocklock up starts PostgreSQL unless --orders off)"
                .to_owned(),
        )
    })
}

async fn client(db: &Database) -> Result<std::sync::Arc<Client>, AppError> {
    db.client()
        .await
        .map_err(|err| AppError::DatabaseUnavailable(format!("PostgreSQL: {err:#}")))
}

fn unavailable(err: anyhow::Error) -> AppError {
    match err.downcast::<crate::store::StoreError>() {
        Ok(err) => AppError::Unavailable(err),
        Err(err) => AppError::DatabaseUnavailable(format!("PostgreSQL: {err:#}")),
    }
}

/// `GET /api/orders?sku=S`: the books at most [`FRESH_FOR`] old, shared
/// by every caller of this instance; with the admin token (`Authorization:
/// Bearer`), read now (a wrong one: 401).
pub(super) async fn view(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<SkuQuery>, QueryRejection>,
) -> Result<Json<OrdersView>, AppError> {
    let sku = Sku::parse(&query?.0.sku)?;
    let admin = headers.contains_key(axum::http::header::AUTHORIZATION);
    if admin {
        state.authorize(&headers)?;
    }
    let database = database(&state)?;
    let db = client(database).await?;
    let (books, age) = if admin {
        (
            books(state.store(), &db, sku.as_str()).await,
            Duration::ZERO,
        )
    } else {
        match database
            .recent
            .get(state.store(), &db, sku.as_str(), FRESH_FOR)
            .await
        {
            Ok((books, age)) => (Ok(books), age),
            Err(err) => (Err(err), Duration::ZERO),
        }
    };
    let Books {
        summary,
        reconciliation,
    } = books.map_err(unavailable)?;
    Ok(Json(OrdersView {
        verdict: reconciliation.verdict(),
        summary,
        reconciliation,
        age_ms: age.as_millis() as u64,
    }))
}

/// `GET /api/orders/find?sku=S&request_id=R`: the order a request became.
pub(super) async fn find(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<FindQuery>, QueryRejection>,
) -> Result<Json<OrderView>, AppError> {
    let Query(query) = query?;
    let sku = Sku::parse(&query.sku)?;
    let token = order_token(&headers);
    let db = client(database(&state)?).await?;
    let row = db
        .query_opt(
            "SELECT id, unit, status,
                    CASE WHEN status = 'pending_payment'
                         THEN greatest(0, extract(epoch FROM pay_by - clock_timestamp()) * 1000)::bigint END,
                    token
             FROM orders WHERE sku = $1 AND request_id = $2 ORDER BY epoch DESC LIMIT 1",
            &[&sku.as_str(), &query.request_id],
        )
        .await
        .map_err(|err| unavailable(err.into()))?;
    let row = row.filter(|row| {
        let owned: Option<String> = row.try_get(4).ok().flatten();
        expiry::token_matches(owned.as_deref(), token)
    });
    let row = row.ok_or_else(|| {
        AppError::Missing(
            "no order for this request id and X-Order-Token (yet: a worker writes it a moment after the sale)"
                .to_owned(),
        )
    })?;
    let get = |err: tokio_postgres::Error| unavailable(err.into());
    Ok(Json(OrderView {
        id: row.try_get(0).map_err(get)?,
        sku: sku.as_str().to_owned(),
        unit: row.try_get(1).map_err(get)?,
        status: row.try_get(2).map_err(get)?,
        pay_within_ms: row.try_get(3).map_err(get)?,
    }))
}

/// The `X-Order-Token` header; empty (matching no order) when absent or
/// not text.
fn order_token(headers: &HeaderMap) -> &str {
    headers
        .get(ORDER_TOKEN)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
}

/// `POST /api/orders/{id}/pay` with `X-Order-Token`: 200 paid (again: a
/// retry), 409 expired, 404 (no such order, or not this token's).
pub(super) async fn pay(
    State(state): State<AppState>,
    headers: HeaderMap,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<serde_json::Value>, AppError> {
    let Path(id) = id?;
    let id: i64 = id.parse().map_err(|_| {
        AppError::Malformed(format!(
            "path: the order id must be a number, not {:?}",
            id.chars().take(40).collect::<String>()
        ))
    })?;
    let db = client(database(&state)?).await?;
    match expiry::pay(&db, id, order_token(&headers))
        .await
        .map_err(unavailable)?
    {
        Paid::Paid { sku, unit, again } => Ok(Json(serde_json::json!({
            "id": id, "status": "paid", "sku": sku, "unit": unit, "again": again,
        }))),
        Paid::Expired => Err(AppError::Conflict(
            "the reservation expired: its unit went back to the stock".to_owned(),
        )),
        // The same words for every id: no hint whether the order exists.
        Paid::NotFound => Err(AppError::Missing(
            "no such order for this X-Order-Token".to_owned(),
        )),
    }
}

/// `POST /api/admin/orders/expire`: one expiry pass now (the instances run
/// them by themselves too); what it did.
pub(super) async fn expire(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Expired>, AppError> {
    state.authorize(&headers)?;
    let db = database(&state)?;
    let mut client = crate::orders::connect(&db.config.postgres_url)
        .await
        .map_err(unavailable)?;
    let mut conn = state.store().conn().await?;
    let gates = crate::gate::Gates::of(state.chaos(), state.store());
    Ok(Json(
        expiry::expire(&mut client, &mut conn, gates.as_ref())
            .await
            .map_err(unavailable)?,
    ))
}
