//! The page and what a browser or Prometheus fetches beside the board: the
//! cards rendered on the server, the assets compiled into the binary, and
//! the instance's metrics.

use askama::Template;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{Html, IntoResponse, Response};

use super::Dashboard;
use crate::lab::Scenario;
use crate::variants::Variant;
use crate::web::AppError;
use crate::wire::VariantInfo;

/// The page. The cards are rendered here, so the page reads well before its
/// script runs; the script then keeps the numbers live.
#[derive(Template)]
#[template(path = "index.html")]
struct IndexPage {
    variants: Vec<Card>,
    instance: String,
}

/// One variant's card: what `/api/variants` says of it, and its claim in
/// every scenario of the lab (its row of the teaching matrix).
struct Card {
    info: VariantInfo,
    /// (scenario, claim) for every scenario, in the lab's order.
    claims: Vec<(&'static str, String)>,
}

impl std::ops::Deref for Card {
    type Target = VariantInfo;
    fn deref(&self) -> &VariantInfo {
        &self.info
    }
}

/// `GET /`
pub(super) async fn index(State(state): State<Dashboard>) -> Result<Html<String>, AppError> {
    let page = IndexPage {
        variants: Variant::ALL
            .iter()
            .map(|&v| Card {
                info: v.info(),
                claims: Scenario::ALL
                    .iter()
                    .map(|s| (s.name(), s.claim(v).text()))
                    .collect(),
            })
            .collect(),
        instance: state.instance().to_owned(),
    };
    page.render()
        .map(Html)
        .map_err(|err| AppError::Internal(format!("template: {err}")))
}

/// The page's assets, compiled into the binary so an instance needs no
/// files beside it (containers, `up` from any directory).
const APP_JS: &str = include_str!("../../static/app.js");
const STYLE_CSS: &str = include_str!("../../static/style.css");

fn asset(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

pub(super) async fn app_js() -> Response {
    asset(APP_JS, "text/javascript; charset=utf-8")
}

pub(super) async fn style_css() -> Response {
    asset(STYLE_CSS, "text/css; charset=utf-8")
}

/// `GET /metrics`
pub(super) async fn metrics(State(state): State<Dashboard>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4"),
        )],
        state.metrics().render(),
    )
        .into_response()
}
