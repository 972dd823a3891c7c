//! `GET /bench/bare?sku=`: the bench's floor, served only by an instance
//! started with `serve --bench-bare`. One EVALSHA of a bare decrement
//! (DECR and HINCRBY on keys of its own) and a minimal JSON answer: no
//! ledger, timeline, marks, request ids or metrics. `stocklock bench`
//! compares `lua` with it (row `lua-vs-bare`): what a correct sale costs
//! over the cheapest answer that still makes one Redis round trip.

use std::sync::LazyLock;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use redis::Script;
use serde::Serialize;

use super::{AppState, Pairs};
use crate::knobs::{InputError, Sku};
use crate::web::AppError;

static BARE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../scripts/bare.lua")));

/// The keys of the bare baseline for `sku`: never a real SKU's keys, so
/// the bench cannot touch a stock or a ledger. Both share the hash tag.
fn bare_keys(sku: &Sku) -> [String; 2] {
    [
        format!("bench_bare:{{{sku}}}"),
        format!("bench_bare_count:{{{sku}}}"),
    ]
}

/// The answer: the counter after the decrement.
#[derive(Serialize)]
pub(super) struct BareAnswer {
    left: i64,
}

/// `GET /bench/bare?sku=`: `sku` only (the default SKU's name when absent).
pub(super) async fn bare(
    State(state): State<AppState>,
    query: Result<Query<Pairs>, QueryRejection>,
) -> Result<Json<BareAnswer>, AppError> {
    let mut sku = None;
    for (name, value) in query?.0 {
        match name.as_str() {
            "sku" if sku.is_none() => sku = Some(Sku::parse(&value)?),
            "sku" => return Err(InputError::new("sku", "given more than once").into()),
            _ => {
                let shown: String = name.chars().take(40).collect();
                return Err(
                    InputError::new(format!("{shown:?}"), "unknown parameter; known: sku").into(),
                );
            }
        }
    }
    let [counter, counts] = bare_keys(&sku.unwrap_or_default());
    let mut conn = state.store().conn().await?;
    let left: i64 = BARE
        .key(counter)
        .key(counts)
        .invoke_async(&mut conn)
        .await
        .map_err(crate::store::StoreError)?;
    Ok(Json(BareAnswer { left }))
}
