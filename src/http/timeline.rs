//! The timeline of a SKU: its critical sections and chaos events as JSON
//! (`GET /api/timeline?sku=`), and the same as one self-contained HTML file
//! for a slide (`GET /api/timeline/export?sku=`).

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::{AppState, Pairs};
use crate::knobs::{InputError, Sku};
use crate::store::Keys;
use crate::timeline::{self, Timeline};
use crate::web::AppError;

/// The longest window `seconds` may ask for: a day.
const MAX_SECONDS: u64 = 86_400;

/// `?sku=` (required) and `?seconds=` (only the last that many).
fn query(pairs: &Pairs) -> Result<(Sku, Option<u64>), AppError> {
    let (mut sku, mut seconds) = (None, None);
    for (name, value) in pairs {
        match name.as_str() {
            "sku" if sku.is_none() => sku = Some(Sku::parse(value)?),
            "seconds" if seconds.is_none() => {
                let refuse = || {
                    InputError::new(
                        "seconds",
                        format!("must be a whole number from 1 to {MAX_SECONDS}, got {value:?}"),
                    )
                };
                let n: u64 = value.parse().map_err(|_| refuse())?;
                if !(1..=MAX_SECONDS).contains(&n) {
                    return Err(refuse().into());
                }
                seconds = Some(n);
            }
            "sku" | "seconds" => return Err(InputError::new(name, "given more than once").into()),
            other => {
                return Err(InputError::new(
                    format!("{other:?}"),
                    "unknown parameter; known: sku, seconds",
                )
                .into());
            }
        }
    }
    let sku =
        sku.ok_or_else(|| InputError::new("sku", "required: the SKU whose timeline to show"))?;
    Ok((sku, seconds))
}

/// Reads the timeline once every instance has handed in its sections, or
/// a second has passed (then it says so: `counted_in` is false).
async fn read(state: &AppState, pairs: &Pairs) -> Result<Timeline, AppError> {
    let (sku, seconds) = query(pairs)?;
    let counted_in = state.seller().flush_everywhere().await;
    let mut conn = state.store().conn().await?;
    let keys = Keys::new(&sku);
    let snapshot = super::info::snapshot(state, &mut conn, &keys, &sku).await?;
    Ok(timeline::read(&mut conn, &keys, snapshot, seconds, counted_in).await?)
}

/// `GET /api/timeline?sku=[&seconds=]`
pub(super) async fn view(
    State(state): State<AppState>,
    query: Result<Query<Pairs>, QueryRejection>,
) -> Result<Json<Timeline>, AppError> {
    Ok(Json(read(&state, &query?.0).await?))
}

/// `GET /api/timeline/export?sku=[&seconds=]`: one HTML file, downloaded.
pub(super) async fn export(
    State(state): State<AppState>,
    query: Result<Query<Pairs>, QueryRejection>,
) -> Result<Response, AppError> {
    let timeline = read(&state, &query?.0).await?;
    let html = crate::timeline::export::render(&timeline, &crate::load::bench::utc_now())
        .map_err(AppError::Internal)?;
    let disposition = format!(
        "attachment; filename=\"stocklock-timeline-{}.html\"",
        timeline.sku
    );
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (
                header::CONTENT_DISPOSITION,
                HeaderValue::from_str(&disposition)
                    .unwrap_or_else(|_| HeaderValue::from_static("attachment")),
            ),
        ],
        html,
    )
        .into_response())
}
