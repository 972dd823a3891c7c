//! One instance driven in-process ([`InProcess`]) on a real Redis.

use super::*;

/// The admin token of the in-process routers.
pub(crate) const ADMIN_TOKEN: &str = "test-token";

/// One instance's router, driven in-process with `oneshot` (no socket), on
/// a real Redis: the one way the tests call an instance without a stack.
#[derive(Clone)]
pub(crate) struct InProcess(pub(crate) axum::Router);

impl InProcess {
    /// An instance named `instance` on `store`, its release listener
    /// subscribed as in a real instance, its Redlock "nodes" the store's
    /// other databases ([`redlock_on`]).
    pub(crate) async fn start(store: &Store, instance: &str, chaos: Chaos) -> InProcess {
        InProcess::listening(
            store,
            InstanceConfig {
                chaos,
                lock_stores: stocklock::lock::LockStoresConfig {
                    redlock_nodes: redlock_on(store),
                    ..Default::default()
                },
                ..in_process_config(instance)
            },
        )
        .await
    }

    /// An instance configured as `config` says, its release listener
    /// subscribed as in a real instance.
    pub(crate) async fn listening(store: &Store, config: InstanceConfig) -> InProcess {
        let wakeups = Wakeups::new();
        // Lives as long as the test's runtime.
        let _listener = wakeups.listen(store.client().clone());
        wakeups.subscribed().await;
        InProcess::with(store, wakeups, config)
    }

    /// An instance configured as `config` says (e.g. without Redlock nodes).
    pub(crate) fn with(store: &Store, wakeups: Wakeups, config: InstanceConfig) -> InProcess {
        InProcess(app(AppState::new(store.clone(), config, wakeups)))
    }

    /// Sends `request`; the answer as it came.
    pub(crate) async fn send(&self, request: Request<Body>) -> Response<Body> {
        self.0.clone().oneshot(request).await.unwrap()
    }

    /// Sends `request`; the status and the JSON body, which every answer
    /// of the API has (the test fails if it has not).
    pub(crate) async fn call(&self, request: Request<Body>) -> (StatusCode, Value) {
        let response = self.send(request).await;
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| panic!("not JSON ({status}): {}", String::from_utf8_lossy(&bytes)));
        (status, body)
    }

    /// `GET uri`: the status and the JSON body.
    pub(crate) async fn get(&self, uri: &str) -> (StatusCode, Value) {
        self.call(Request::get(uri).body(Body::empty()).unwrap())
            .await
    }

    /// `GET uri` of a page: the status, the content type and the text.
    pub(crate) async fn page(&self, uri: &str) -> (StatusCode, String, String) {
        let response = self
            .send(Request::get(uri).body(Body::empty()).unwrap())
            .await;
        let status = response.status();
        let content_type = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_owned();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            content_type,
            String::from_utf8(body.to_vec()).unwrap(),
        )
    }

    /// `POST /api/admin/reset` with `body` (a JSON text, sent as is) and
    /// the `authorization` header `auth`, if any.
    pub(crate) async fn reset_with(&self, body: &str, auth: Option<&str>) -> (StatusCode, Value) {
        let mut request =
            Request::post("/api/admin/reset").header("content-type", "application/json");
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        self.call(request.body(Body::from(body.to_owned())).unwrap())
            .await
    }

    /// Gives `sku` `stock` units over `buckets` buckets (0: one key); the
    /// reset must succeed.
    pub(crate) async fn reset(&self, sku: &str, stock: i64, buckets: u32) {
        let body = serde_json::json!({"sku": sku, "stock": stock, "buckets": buckets});
        let (status, answer) = self
            .reset_with(&body.to_string(), Some(&format!("Bearer {ADMIN_TOKEN}")))
            .await;
        assert_eq!(status, 200, "{answer}");
    }

    /// `GET /api/state?sku=`, which must succeed, through [`intact`].
    pub(crate) async fn state(&self, sku: &str) -> StateSnapshot {
        let (status, body) = self.get(&format!("/api/state?sku={sku}")).await;
        assert_eq!(status, 200, "{body}");
        intact(serde_json::from_value(body).unwrap())
    }
}

/// Five Redlock "nodes" for in-process routers: five databases of the one
/// test Redis, independent key spaces. Enough to run `redlock` like every
/// other variant; the tests of Redlock itself use five real servers.
pub(crate) fn redlock_on(store: &Store) -> Vec<String> {
    let addr = store.client().get_connection_info().addr().to_string();
    (1..=5).map(|db| format!("redis://{addr}/{db}")).collect()
}

/// The configuration of an in-process instance called `name`: chaos off,
/// no lock store beside its Redis, the default TTLs.
pub(crate) fn in_process_config(name: &str) -> InstanceConfig {
    InstanceConfig {
        instance: name.to_owned(),
        admin_token: ADMIN_TOKEN.to_owned(),
        default_variant: Variant::Lua,
        public_url: "http://127.0.0.1:9".to_owned(),
        own_url: "http://127.0.0.1:9".to_owned(),
        chaos: Chaos::off(),
        lock_stores: Default::default(),
        request_ttl: stocklock::ledger::DEFAULT_REQUEST_TTL,
        request_ids_per_sku: stocklock::ledger::DEFAULT_REQUEST_IDS_PER_SKU,
        sold_out_mark_ttl: stocklock::marks::DEFAULT_MARK_TTL,
        orders: None,
        bench_bare: false,
        batch_max: stocklock::variants::DEFAULT_BATCH_MAX,
    }
}
