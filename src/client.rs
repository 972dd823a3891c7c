//! The typed client of a running stack's HTTP API: the one way `load`, `lab`,
//! the dashboard's runs and the tests talk to a stack, through nginx or to
//! one instance's own URL.
//!
//! The control plane (`variants`, `state`, `board`, `reset`, `chaos`, any
//! admin POST) answers `anyhow::Result`, and its errors say which URL could
//! not be reached, or what was refused, with the status and the body.
//! `deduct` and `get` never fail: a request that got no answer (refused,
//! dropped by a dying process, timed out) is status 0, which is evidence to
//! the lab, not an error.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

mod deduction;
mod refused;
pub use deduction::{DeductBody, Deduction};
pub use refused::Refused;

use crate::history::{Recorder, Told};
use crate::orders::expiry::Expired;
use crate::wire::{Board, Health, OrderView, OrdersView, ResetRequest, StateSnapshot, VariantInfo};

/// A client of one stack (nginx) or one instance, with the stack's admin
/// token for `/api/admin/*`. Cloning it shares its connection pool.
#[derive(Clone, Debug)]
pub struct StackClient {
    http: reqwest::Client,
    /// `http://host:port`, without a trailing slash.
    base: String,
    token: Option<String>,
    /// Every request's bound; the error says so when it runs out.
    timeout: Duration,
    /// Records every `/deductStock` request and what it was told, and every
    /// reset, for the history checker (the lab's, explore's, the soak's
    /// buyers). Shared by the clients made from this one.
    history: Option<Recorder>,
}

impl StackClient {
    /// A client of `base` (`http://host:port`) whose requests each get
    /// `timeout` to be answered.
    pub fn new(base: &str, token: Option<String>, timeout: Duration) -> anyhow::Result<Self> {
        Ok(Self {
            http: reqwest::Client::builder()
                .timeout(timeout)
                // The lab's crowds and the tests' bursts: hundreds at once.
                .pool_max_idle_per_host(256)
                .build()?,
            base: base.trim_end_matches('/').to_owned(),
            token,
            timeout,
            history: None,
        })
    }

    /// The same client, recording into `recorder` (see [`Recorder`]).
    pub fn recording(&self, recorder: Recorder) -> StackClient {
        StackClient {
            history: Some(recorder),
            ..self.clone()
        }
    }

    /// What this client records into, if anything.
    pub fn recorder(&self) -> Option<&Recorder> {
        self.history.as_ref()
    }

    /// `GET /api/state?sku=`, recorded as a reading of the books (the
    /// store that holds the SKU's truth) when this client records.
    pub async fn read_books(&self, sku: &str) -> anyhow::Result<StateSnapshot> {
        let call = self.history.as_ref().map(Recorder::now);
        let state = self.state(sku).await?;
        if let (Some(recorder), Some(call)) = (&self.history, call) {
            recorder.read(sku, call, state.remaining);
        }
        Ok(state)
    }

    /// The same client (pool, token, timeout) aimed at `base`: one
    /// instance's own URL, for what must reach that instance and not
    /// whichever one nginx picks.
    pub fn at(&self, base: &str) -> StackClient {
        StackClient {
            base: base.trim_end_matches('/').to_owned(),
            ..self.clone()
        }
    }

    /// `http://host:port` of the stack or instance.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The underlying HTTP client, for requests this API does not type
    /// (a burst that counts answers its own way, a request without the token).
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// `path` on this stack as a full URL.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `GET /api/variants`.
    pub async fn variants(&self) -> anyhow::Result<Vec<VariantInfo>> {
        self.get_json("/api/variants").await
    }

    /// `GET /api/state?sku=`: the SKU's ledger, stock and lock.
    pub async fn state(&self, sku: &str) -> anyhow::Result<StateSnapshot> {
        self.get_json(&format!("/api/state?sku={sku}")).await
    }

    /// A SKU's timeline since its last reset (`/api/timeline`).
    pub async fn timeline(&self, sku: &str) -> anyhow::Result<crate::timeline::Timeline> {
        self.get_json(&format!("/api/timeline?sku={sku}")).await
    }

    /// A SKU's timeline as one self-contained HTML file (`/api/timeline/export`).
    pub async fn timeline_export(&self, sku: &str) -> anyhow::Result<String> {
        let url = self.url(&format!("/api/timeline/export?sku={sku}"));
        let response = self.http.get(&url).send().await?.error_for_status()?;
        Ok(response.text().await?)
    }

    /// The states of `skus`, 16 requests at a time.
    pub async fn states(&self, skus: &[String]) -> anyhow::Result<Vec<StateSnapshot>> {
        let mut states = Vec::with_capacity(skus.len());
        for chunk in skus.chunks(16) {
            let asks = chunk.iter().map(|sku| self.state(sku));
            for state in futures_util::future::join_all(asks).await {
                states.push(state?);
            }
        }
        Ok(states)
    }

    /// `GET /api/orders?sku=`: the SKU's orders and their reconciliation
    /// with the ledger (orders on), read now when the client has the admin
    /// token (without it, a reading up to 2 s old).
    pub async fn orders(&self, sku: &str) -> anyhow::Result<OrdersView> {
        let url = self.url(&format!("/api/orders?sku={sku}"));
        let mut request = self.http.get(&url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        self.exchange(&url, &format!("GET {url}"), request).await
    }

    /// `GET /api/orders/find`: the order `request_id` became, shown to the
    /// holder of its `token`; `None` while no worker has written it yet
    /// (or for another token: 404).
    pub async fn find_order(
        &self,
        sku: &str,
        request_id: &str,
        token: &str,
    ) -> anyhow::Result<Option<OrderView>> {
        let path = format!("/api/orders/find?sku={sku}&request_id={request_id}");
        let url = self.url(&path);
        let response = self
            .http
            .get(&url)
            .header(crate::wire::ORDER_TOKEN, token)
            .send()
            .await
            .map_err(|err| self.unreachable(&url, err))?;
        match response.status() {
            reqwest::StatusCode::NOT_FOUND => Ok(None),
            status if status.is_success() => response
                .json()
                .await
                .map(Some)
                .with_context(|| format!("GET {url}: unexpected answer")),
            status => bail!(
                "GET {url}: {status}: {}",
                response.text().await.unwrap_or_default()
            ),
        }
    }

    /// `POST /api/orders/{id}/pay` with its `token`: the status (200 paid,
    /// 409 expired, 404 no such order for this token; 0 when no answer came).
    pub async fn pay(&self, id: i64, token: &str) -> u16 {
        match self
            .http
            .post(self.url(&format!("/api/orders/{id}/pay")))
            .header(crate::wire::ORDER_TOKEN, token)
            .send()
            .await
        {
            Ok(response) => response.status().as_u16(),
            Err(_) => 0,
        }
    }

    /// `POST /api/admin/orders/expire`: one expiry pass now; what it did.
    pub async fn expire_orders(&self) -> anyhow::Result<Expired> {
        self.admin("/api/admin/orders/expire", &serde_json::json!({}))
            .await
    }

    /// `GET /healthz` (through nginx: whichever instance nginx picks).
    pub async fn health(&self) -> anyhow::Result<Health> {
        self.get_json("/healthz").await
    }

    /// `GET /api/board`: what the dashboard shows (instances, SKUs, runs).
    pub async fn board(&self) -> anyhow::Result<Board> {
        self.get_json("/api/board").await
    }

    /// `POST /api/admin/reset`: `sku` gets `stock` over `buckets` buckets
    /// (0: one key); the state after it.
    pub async fn reset(
        &self,
        sku: &str,
        stock: i64,
        buckets: u32,
    ) -> anyhow::Result<StateSnapshot> {
        self.reset_as(&ResetRequest {
            sku: sku.to_owned(),
            stock,
            buckets,
            timeline: None,
        })
        .await
    }

    /// `POST /api/admin/reset` with every field of the request. A client
    /// that records starts the SKU's new stock in its history.
    pub async fn reset_as(&self, body: &ResetRequest) -> anyhow::Result<StateSnapshot> {
        let sku = &body.sku;
        let state: StateSnapshot = self
            .post("/api/admin/reset", body, &format!("reset of {sku} refused"))
            .await?;
        if let Some(recorder) = &self.history {
            recorder.declare(sku, state.remaining);
        }
        Ok(state)
    }

    /// `POST /api/admin/chaos` (a [`crate::wire::ChaosAction`], or its
    /// JSON): its answer (`{"deleted": true}`, `{"clock_skew_ms": 5000}`, ...).
    pub async fn chaos(&self, action: &impl Serialize) -> anyhow::Result<Value> {
        self.admin("/api/admin/chaos", action).await
    }

    /// Any `POST /api/admin/...` with the token; its JSON answer.
    pub async fn admin<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
    ) -> anyhow::Result<T> {
        self.post(path, body, &format!("POST {}", self.url(path)))
            .await
    }

    /// A `/deductStock` request (`path` with its query): the answer, typed,
    /// and how long it took. A client that records notes what it was told.
    pub async fn deduct(&self, path: &str) -> Deduction {
        let call = self
            .history
            .as_ref()
            .map(|recorder| (recorder, recorder.call(&query_value(path, "sku"))));
        let deduction = self.deduct_unrecorded(path).await;
        if let Some((recorder, call)) = call {
            let unit = deduction.unit();
            let told = match recorder.silenced(path) {
                true => Told::Nothing,
                false => Told::from_answer(deduction.status, deduction.unknown(), unit),
            };
            let id = query_value(path, "request_id");
            let id = (!id.is_empty()).then_some(id.as_str());
            recorder.told(call, recorder.client(), id, told);
        }
        deduction
    }

    async fn deduct_unrecorded(&self, path: &str) -> Deduction {
        let sent = Instant::now();
        let (status, body) = match self.http.get(self.url(path)).send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                let body = match response.json::<Value>().await {
                    Ok(json) => DeductBody::from(json),
                    Err(_) => DeductBody::Unreadable,
                };
                (status, body)
            }
            Err(_) => (0, DeductBody::Unreadable),
        };
        Deduction {
            status,
            body,
            took: sent.elapsed(),
        }
    }

    /// One GET of any path: the status (0 when no answer came) and the JSON
    /// body (`null` when there was none).
    pub async fn get(&self, path: &str) -> (u16, Value) {
        match self.http.get(self.url(path)).send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                (status, response.json().await.unwrap_or(Value::Null))
            }
            Err(_) => (0, Value::Null),
        }
    }

    async fn get_json<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        let url = self.url(path);
        self.exchange(&url, &format!("GET {url}"), self.http.get(&url))
            .await
    }

    async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
        what: &str,
    ) -> anyhow::Result<T> {
        let url = self.url(path);
        let Some(token) = &self.token else {
            bail!("{what}: no admin token (stocklock up prints it)");
        };
        let request = self.http.post(&url).bearer_auth(token).json(body);
        self.exchange(&url, what, request).await
    }

    /// Sends `request` to `url` and reads a JSON answer; a refusal says
    /// `what` was refused, with the status and the body.
    async fn exchange<T: DeserializeOwned>(
        &self,
        url: &str,
        what: &str,
        request: reqwest::RequestBuilder,
    ) -> anyhow::Result<T> {
        let response = request
            .send()
            .await
            .map_err(|err| self.unreachable(url, err))?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            return Err(Refused {
                what: what.to_owned(),
                status,
                body,
            }
            .into());
        }
        response
            .json()
            .await
            .with_context(|| format!("{what}: unexpected answer"))
    }

    fn unreachable(&self, url: &str, err: reqwest::Error) -> anyhow::Error {
        let reason = if err.is_connect() {
            "cannot connect (is the stack up? ./scripts/up.sh)".to_owned()
        } else if err.is_timeout() {
            format!("no answer within {} s", self.timeout.as_secs_f64())
        } else {
            err.to_string()
        };
        anyhow::anyhow!("{url}: {reason}")
    }
}

/// The value of `name` in `path`'s query (empty when absent).
fn query_value(path: &str, name: &str) -> String {
    let query = path.split_once('?').map_or("", |(_, q)| q);
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_default()
        .to_owned()
}
