//! The page and what a browser or Prometheus fetches beside the board: the
//! cards rendered on the server, the assets compiled into the binary, and
//! the instance's metrics.

use askama::Template;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
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
    /// The classroom seat the page is shown to (empty: the teacher's), and
    /// what its SKUs start with.
    seat: String,
    sku_prefix: String,
    /// Whether the instance has the orders' database.
    orders: bool,
}

/// One variant's card: what `/api/variants` says of it, and its claim in
/// every scenario of the lab (its row of the teaching matrix).
struct Card {
    info: VariantInfo,
    /// Its Chinese protection and explanation as HTML, their code (between
    /// backticks) as `<code>`.
    protection_zh: String,
    explanation_zh: String,
    undersells_zh: Option<String>,
    /// (scenario, claim, its Chinese) for every scenario, in the lab's order.
    claims: Vec<(&'static str, String, String)>,
}

impl std::ops::Deref for Card {
    type Target = VariantInfo;
    fn deref(&self) -> &VariantInfo {
        &self.info
    }
}

/// `GET /`
pub(super) async fn index(
    State(state): State<Dashboard>,
    headers: axum::http::HeaderMap,
) -> Result<Html<String>, AppError> {
    let seat = state.seat_of(&headers).await;
    let page = IndexPage {
        sku_prefix: (seat.as_ref())
            .map(|s| crate::classroom::jobs::sku_prefix(&s.id))
            .unwrap_or_default(),
        seat: seat.map(|s| s.name).unwrap_or_default(),
        variants: Variant::ALL
            .iter()
            .map(|&v| Card {
                protection_zh: code_spans(&v.info().protection_zh),
                explanation_zh: code_spans(&v.info().explanation_zh),
                undersells_zh: v.info().undersells_zh.as_deref().map(code_spans),
                info: v.info(),
                claims: Scenario::ALL
                    .iter()
                    .map(|s| {
                        (
                            s.name(),
                            s.claim(v).text(),
                            code_spans(&s.claim(v).text_zh()),
                        )
                    })
                    .collect(),
            })
            .collect(),
        instance: state.instance().to_owned(),
        orders: state.0.parts.orders,
    };
    page.render()
        .map(Html)
        .map_err(|err| AppError::Internal(format!("template: {err}")))
}

/// `text` as HTML: escaped, and what stands between two backticks (a
/// command, a key, a column) as `<code>`. The Chinese prose keeps its
/// identifiers in Latin letters and marks them so.
pub fn code_spans(text: &str) -> String {
    let escaped = text
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#x27;");
    let mut html = String::new();
    for (n, part) in escaped.split('`').enumerate() {
        match n % 2 {
            1 => html += &format!("<code>{part}</code>"),
            _ => html += part,
        }
    }
    html
}

/// The pages' assets, compiled into the binary so an instance needs no
/// files beside it (containers, `up` from any directory).
const ASSETS: [(&str, &str, &str); 17] = [
    ("common.js", include_str!("../../static/common.js"), JS),
    ("app.js", include_str!("../../static/app.js"), JS),
    ("style.css", include_str!("../../static/style.css"), CSS),
    ("timeline.js", include_str!("../../static/timeline.js"), JS),
    (
        "timeline.css",
        include_str!("../../static/timeline.css"),
        CSS,
    ),
    (
        "timeline_page.js",
        include_str!("../../static/timeline_page.js"),
        JS,
    ),
    ("lessons.js", include_str!("../../static/lessons.js"), JS),
    ("lessons.css", include_str!("../../static/lessons.css"), CSS),
    ("check.js", include_str!("../../static/check.js"), JS),
    ("step.js", include_str!("../../static/step.js"), JS),
    ("step.css", include_str!("../../static/step.css"), CSS),
    (
        "step_levels.js",
        include_str!("../../static/step_levels.js"),
        JS,
    ),
    (
        "classroom.js",
        include_str!("../../static/classroom.js"),
        JS,
    ),
    (
        "classroom.css",
        include_str!("../../static/classroom.css"),
        CSS,
    ),
    ("soak.js", include_str!("../../static/soak.js"), JS),
    ("soak.css", include_str!("../../static/soak.css"), CSS),
    ("favicon.svg", include_str!("../../static/favicon.svg"), SVG),
];
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const SVG: &str = "image/svg+xml";

/// `GET /favicon.ico`: the pages' icon (an SVG, which browsers take at
/// this address too), so that no page's console shows a 404 for it.
pub(super) async fn favicon() -> Result<Response, AppError> {
    asset_named(Path("favicon.svg".to_owned())).await
}

/// `GET /static/{asset}`
pub(super) async fn asset_named(Path(name): Path<String>) -> Result<Response, AppError> {
    let (_, body, content_type) = ASSETS
        .iter()
        .find(|(n, ..)| *n == name)
        .ok_or(AppError::NotFound(format!("/static/{name}")))?;
    Ok((
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        *body,
    )
        .into_response())
}

/// The timeline page.
#[derive(Template)]
#[template(path = "timeline.html")]
struct TimelinePage {
    /// The SKU asked for (may be empty: the page asks).
    sku: String,
    skus: Vec<String>,
}

/// `GET /timeline?sku=`: the page; its script reads `/api/timeline`.
pub(super) async fn timeline(
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Html<String>, AppError> {
    let sku = match query?.0.iter().find(|(name, _)| name == "sku") {
        Some((_, sku)) => crate::knobs::Sku::parse(sku)?.as_str().to_owned(),
        None => String::new(),
    };
    TimelinePage {
        sku,
        skus: Variant::names(),
    }
    .render()
    .map(Html)
    .map_err(|err| AppError::Internal(format!("template: {err}")))
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
