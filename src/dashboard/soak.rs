//! The soak's routes: the page that follows a running `stocklock soak`
//! (random faults under load, for minutes), and its status as JSON, read
//! from the key the soak rewrites every second ([`SOAK_STATUS_KEY`], with
//! a TTL, so a soak that died is soon gone from the page).

use askama::Template;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use redis::AsyncCommands;

use super::Dashboard;
use crate::store::StoreError;
use crate::web::AppError;
use crate::wire::{SOAK_STATUS_KEY, SoakStatus};

#[derive(Template)]
#[template(path = "soak.html")]
struct SoakPage {
    instance: String,
}

/// `GET /soak`: the page; its script polls `/api/soak` every second.
pub(super) async fn page(State(state): State<Dashboard>) -> Result<Html<String>, AppError> {
    SoakPage {
        instance: state.instance().to_owned(),
    }
    .render()
    .map(Html)
    .map_err(|err| AppError::Internal(format!("template: {err}")))
}

/// `GET /api/soak`: the running soak's last status; 204 (no content)
/// when none is running (not an error: the page polls it every second,
/// and a 404 would be one in its console each time), 503 when Redis is
/// away.
pub(super) async fn status(State(state): State<Dashboard>) -> Result<Response, AppError> {
    match read(state.store()).await? {
        Some(status) => Ok(Json(status).into_response()),
        None => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}

/// The status the soak last wrote, if its key is still there.
async fn read(store: &crate::store::Store) -> Result<Option<SoakStatus>, AppError> {
    let mut conn = store.conn().await?;
    let json: Option<String> = conn.get(SOAK_STATUS_KEY).await.map_err(StoreError::from)?;
    json.map(|json| {
        serde_json::from_str(&json).map_err(|err| {
            AppError::Internal(format!(
                "{SOAK_STATUS_KEY} is no soak status this instance reads: {err}"
            ))
        })
    })
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_renders_its_title_and_instance() {
        let html = SoakPage {
            instance: "a".to_owned(),
        }
        .render()
        .unwrap();
        assert!(html.contains("<title>stocklock · soak</title>"), "{html}");
        assert!(html.contains("/static/soak.js"));
        assert!(html.contains("instance</span> a"), "{html}");
    }

    /// A Redis that is not there: 503 `store_unavailable`, never a panic.
    #[tokio::test]
    async fn a_dead_redis_is_a_503() {
        let port = crate::os::free_port().unwrap();
        let store = crate::store::Store::open(&format!("redis://127.0.0.1:{port}")).unwrap();
        let err = read(&store).await.expect_err("nothing listens there");
        assert_eq!(
            err.into_response().status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
    }
}
