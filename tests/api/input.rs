//! The router driven in-process (`oneshot`, no socket) against a real Redis:
//! every kind of bad input gets a 4xx JSON error and changes nothing; a
//! dead Redis gets a 503 and the service comes back with it.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use stocklock::chaos::Chaos;
use stocklock::store::Store;
use stocklock::up::redis::RedisServer;
use stocklock::variants::Variant;
use stocklock::wire::StateSnapshot;
use tower::ServiceExt;

use crate::helpers;

const TOKEN: &str = helpers::ADMIN_TOKEN;

async fn router(redis_url: &str) -> Router {
    helpers::instance_router(&Store::open(redis_url).unwrap(), "t", Chaos::off()).await
}

async fn call(router: &Router, request: Request<Body>) -> (StatusCode, Value) {
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| panic!("not JSON ({status}): {}", String::from_utf8_lossy(&bytes)));
    (status, body)
}

fn get(uri: &str) -> Request<Body> {
    Request::get(uri).body(Body::empty()).unwrap()
}

fn reset_request(body: &str, auth: Option<&str>) -> Request<Body> {
    let mut request = Request::post("/api/admin/reset").header("content-type", "application/json");
    if let Some(auth) = auth {
        request = request.header("authorization", auth);
    }
    request.body(Body::from(body.to_owned())).unwrap()
}

async fn state(router: &Router, sku: &str) -> StateSnapshot {
    let (status, body) = call(router, get(&format!("/api/state?sku={sku}"))).await;
    assert_eq!(status, 200, "{body}");
    helpers::intact(serde_json::from_value(body).unwrap())
}

async fn reset(router: &Router, sku: &str, stock: i64) {
    let body = format!(r#"{{"sku":"{sku}","stock":{stock}}}"#);
    let (status, body) = call(
        router,
        reset_request(&body, Some(&format!("Bearer {TOKEN}"))),
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn bad_input_is_a_4xx_json_error_and_changes_nothing() {
    let redis = helpers::redis().await;
    let router = router(&redis.url()).await;
    reset(&router, "00001", 5).await;
    reset(&router, "s1", 5).await;
    let before = (state(&router, "00001").await, state(&router, "s1").await);

    let huge = "9".repeat(5000);
    let cases: Vec<(String, u16, &str)> = vec![
        // (uri, status, field or error named in the answer)
        ("/deductStock/nope".into(), 404, "unknown_variant"),
        ("/deductStock/LUA".into(), 404, "unknown_variant"),
        ("/deductStock/%E2%98%83".into(), 404, "unknown_variant"),
        ("/deductStock/lua/extra".into(), 404, "not_found"),
        ("/deductStock/lua?sku=".into(), 400, "sku"),
        ("/deductStock/lua?sku=a%20b".into(), 400, "sku"),
        ("/deductStock/lua?sku=%7Bs1%7D".into(), 400, "sku"),
        ("/deductStock/lua?sku=s%C3%A9".into(), 400, "sku"),
        (
            format!("/deductStock/lua?sku={}", "x".repeat(65)),
            400,
            "sku",
        ),
        ("/deductStock/lua?sku=s1&sku=s1".into(), 400, "sku"),
        ("/deductStock/none?sku=s1&work_ms=-1".into(), 400, "work_ms"),
        (
            "/deductStock/none?sku=s1&work_ms=60001".into(),
            400,
            "work_ms",
        ),
        (
            "/deductStock/none?sku=s1&work_ms=1.5".into(),
            400,
            "work_ms",
        ),
        (
            "/deductStock/none?sku=s1&work_ms=abc".into(),
            400,
            "work_ms",
        ),
        ("/deductStock/none?sku=s1&work_ms=".into(), 400, "work_ms"),
        (
            format!("/deductStock/none?sku=s1&work_ms={huge}"),
            400,
            "work_ms",
        ),
        (
            "/deductStock/token?sku=s1&lease_ms=0".into(),
            400,
            "lease_ms",
        ),
        (
            "/deductStock/token?sku=s1&lease_ms=600001".into(),
            400,
            "lease_ms",
        ),
        (
            "/deductStock/token?sku=s1&lease_ms=29".into(),
            400,
            "lease_ms",
        ),
        (
            "/deductStock/token?sku=s1&lease_ms=%EF%BC%91".into(),
            400,
            "lease_ms",
        ),
        (
            "/deductStock/token?sku=s1&wait_ms=-5".into(),
            400,
            "wait_ms",
        ),
        (
            "/deductStock/token?sku=s1&wait_ms=1e3".into(),
            400,
            "wait_ms",
        ),
        (
            "/deductStock/token?sku=s1&wait_ms=99999999999999999999999".into(),
            400,
            "wait_ms",
        ),
        (
            "/deductStock/lua?sku=s1&wrk_ms=5".into(),
            400,
            "unknown parameter",
        ),
        (
            "/deductStock/lua?sku=s1&request_id=a%20b".into(),
            400,
            "request_id",
        ),
        (
            format!("/deductStock/lua?sku=s1&request_id={}", "r".repeat(129)),
            400,
            "request_id",
        ),
        ("/deductStock?work_ms=x".into(), 400, "work_ms"),
        ("/deductStock/lua?sku=%FF".into(), 400, "invalid_input"),
        ("/api/state?sku=a%20b".into(), 400, "sku"),
        ("/api/state?sku=s1&x=1".into(), 400, "unknown parameter"),
        ("/nowhere".into(), 404, "not_found"),
    ];
    for (uri, expected, named) in &cases {
        let (status, body) = call(&router, get(uri)).await;
        assert_eq!(status.as_u16(), *expected, "{uri}: {body}");
        let error = body["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{uri}: no error field: {body}"));
        let detail = body["detail"]
            .as_str()
            .unwrap_or_else(|| panic!("{uri}: no detail: {body}"));
        assert!(
            error.contains(named) || detail.contains(named),
            "{uri}: answer does not name {named:?}: {body}"
        );
        assert!(
            detail.len() < 400,
            "{uri}: detail echoes too much ({} bytes)",
            detail.len()
        );
    }
    let (status, body) = call(&router, get("/deductStock/nope")).await;
    assert_eq!(status, 404);
    assert_eq!(body["valid"].as_array().unwrap().len(), Variant::ALL.len());
    assert!(body["detail"].as_str().unwrap().contains("watchdog"));

    let (status, body) = call(
        &router,
        Request::delete("/deductStock/lua")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, 405, "{body}");

    // Admin: no token, a wrong token, then bad bodies with the right token.
    let good = r#"{"sku":"s1","stock":9}"#;
    for auth in [
        None,
        Some("Bearer nope"),
        Some("test-token"),
        Some("Bearer test-token2"),
        Some("Bearer "),
    ] {
        let (status, body) = call(&router, reset_request(good, auth)).await;
        assert_eq!(status, 401, "{auth:?}: {body}");
    }
    let bearer = format!("Bearer {TOKEN}");
    for (body, named) in [
        (r#"{"sku":"s1","stock":-1}"#, "stock"),
        (r#"{"sku":"s1","stock":1000000001}"#, "stock"),
        (r#"{"sku":"s1","stock":1.5}"#, "invalid_input"),
        (r#"{"sku":"s1","stock":"5"}"#, "invalid_input"),
        (
            r#"{"sku":"s1","stock":99999999999999999999999}"#,
            "invalid_input",
        ),
        (r#"{"sku":"","stock":5}"#, "sku"),
        (r#"{"sku":"a b","stock":5}"#, "sku"),
        (r#"{"sku":"s1"}"#, "invalid_input"),
        (r#"{"sku":"s1","stock":5,"extra":1}"#, "invalid_input"),
        ("not json", "invalid_input"),
        ("", "invalid_input"),
    ] {
        let (status, answer) = call(&router, reset_request(body, Some(&bearer))).await;
        assert!(status.is_client_error(), "{body}: {status} {answer}");
        let text = answer.to_string();
        assert!(
            text.contains(named),
            "{body}: answer does not name {named}: {answer}"
        );
    }

    let after = (state(&router, "00001").await, state(&router, "s1").await);
    assert_eq!(before, after, "bad input changed the state");
}

#[tokio::test]
async fn every_variant_sells_one_unit_in_process() {
    let redis = helpers::redis().await;
    let router = router(&redis.url()).await;
    for variant in Variant::ALL {
        let sku = format!("one-{}", variant.name());
        reset(&router, &sku, 1).await;
        let (status, body) = call(&router, get(&format!("/deductStock/{variant}?sku={sku}"))).await;
        assert_eq!(status, 200, "{variant}: {body}");
        assert_eq!(body["outcome"], "sold");
        assert_eq!(body["unit"], 1);
        assert_eq!(body["remaining"], 0);
        assert_eq!(body["variant"], variant.name());
        assert_eq!(body["instance"], "t");
        let (status, body) = call(&router, get(&format!("/deductStock/{variant}?sku={sku}"))).await;
        assert_eq!(status, 409, "{variant}: {body}");
        assert_eq!(body["outcome"], "sold_out");
        let state = state(&router, &sku).await;
        assert_eq!(
            (state.sold, state.remaining, state.oversold),
            (1, 0, 0),
            "{variant}"
        );
        assert_eq!(state.per_instance.get("t"), Some(&2));
        assert!(!state.lock.held, "{variant}");
    }
    // The default variant.
    reset(&router, "00001", 3).await;
    let (status, body) = call(&router, get("/deductStock")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["variant"], "lua");
    assert_eq!(body["sku"], "00001");
    let (status, body) = call(
        &router,
        Request::post("/deductStock/token")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "POST: {body}");
}

#[tokio::test]
async fn a_held_lock_answers_busy_and_a_lock_without_ttl_shows_in_the_state() {
    let redis = helpers::redis().await;
    let router = router(&redis.url()).await;
    reset(&router, "b1", 5).await;
    // Someone else holds the lock, with no expiry at all (SETNX's orphan).
    let store = Store::open(&redis.url()).unwrap();
    let mut conn = store.conn().await.unwrap();
    let _: () = redis::cmd("SET")
        .arg("lock:{b1}")
        .arg("1")
        .query_async(&mut conn)
        .await
        .unwrap();
    for variant in ["setnx", "token"] {
        let (status, body) = call(&router, get(&format!("/deductStock/{variant}?sku=b1"))).await;
        assert_eq!(status, 429, "{variant}: {body}");
        assert_eq!(body["outcome"], "busy");
        assert_eq!(body["reason"], "lock_held");
    }
    let (status, body) = call(&router, get("/deductStock/watchdog?sku=b1&wait_ms=50")).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["reason"], "wait_timed_out");
    let state = state(&router, "b1").await;
    assert_eq!(state.busy, 3);
    assert!(state.lock.held && state.lock.no_ttl, "{:?}", state.lock);
    assert_eq!(state.lock.holder.as_deref(), Some("1"));
    assert_eq!(state.remaining, 5);
}

#[tokio::test]
async fn a_dead_redis_is_a_503_and_service_resumes_when_it_is_back() {
    let mut redis = helpers::redis().await;
    let port = redis.port();
    let router = router(&redis.url()).await;
    reset(&router, "r1", 100).await;
    let (status, _) = call(&router, get("/deductStock/watchdog?sku=r1")).await;
    assert_eq!(status, 200);

    redis.stop().await;
    // The first command after Redis died may go out on the dead socket: for
    // `lua` that command is its write, so all it can honestly say is that
    // the outcome is unknown. Once the connection is known to be refused,
    // nothing is sent and the answer is that nothing was sold.
    let (status, body) = call(&router, get("/deductStock/lua?sku=r1")).await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body["error"] == "store_unavailable" || body["outcome"] == "unknown",
        "{body}"
    );
    for uri in [
        "/deductStock/watchdog?sku=r1",
        "/deductStock/token?sku=r1",
        "/deductStock/lua?sku=r1",
        "/api/state?sku=r1",
    ] {
        let (status, body) = call(&router, get(uri)).await;
        assert_eq!(status, 503, "{uri}: {body}");
        assert_eq!(body["error"], "store_unavailable", "{uri}: {body}");
        assert!(
            body["detail"]
                .as_str()
                .unwrap()
                .contains("nothing was sold"),
            "{body}"
        );
    }
    let (status, _) = call(&router, get("/healthz")).await;
    assert_eq!(status, 200, "healthz must not depend on Redis");

    // Redis comes back (empty: persistence is off) on the same port.
    let _redis = RedisServer::start(Some(port)).await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (status, body) = call(&router, get("/api/state?sku=r1")).await;
        if status == 200 {
            break;
        }
        assert_eq!(status, 503, "{body}");
        assert!(
            std::time::Instant::now() < deadline,
            "did not recover within 10 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    reset(&router, "r1", 2).await;
    for variant in ["lua", "watchdog"] {
        let (status, body) = call(&router, get(&format!("/deductStock/{variant}?sku=r1"))).await;
        assert_eq!(status, 200, "{variant}: {body}");
    }
}

/// The watchdog learns that its lock vanished (a failover, a clock jump)
/// and the holder backs off before its write: busy `lock_lost`, counted in
/// the ledger, stock untouched.
#[tokio::test]
async fn a_watchdog_holder_that_lost_its_lock_does_not_write() {
    use futures_util::StreamExt;

    let redis = helpers::redis().await;
    let router = router(&redis.url()).await;
    reset(&router, "w1", 5).await;
    let store = Store::open(&redis.url()).unwrap();
    let mut conn = store.conn().await.unwrap();
    let mut events = helpers::keyspace_events(&redis.url(), "lock:{w1}").await;

    let request = {
        let router = router.clone();
        tokio::spawn(async move {
            call(
                &router,
                get("/deductStock/watchdog?sku=w1&lease_ms=300&work_ms=1500"),
            )
            .await
        })
    };
    // The holder's HINCRBY is the event: it holds the lock now.
    let event = tokio::time::timeout(std::time::Duration::from_secs(5), events.next())
        .await
        .expect("the lock was never taken")
        .unwrap();
    assert_eq!(event.get_payload::<String>().unwrap(), "hincrby");
    let deleted: i64 = redis::cmd("DEL")
        .arg("lock:{w1}")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(deleted, 1);

    let (status, body) = request.await.unwrap();
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["reason"], "lock_lost");
    let state = state(&router, "w1").await;
    assert_eq!(
        (state.lost_locks, state.busy, state.sold, state.remaining),
        (1, 1, 0, 5),
        "{state:?}"
    );
}

mod properties {
    //! The bad-input corpus, generated: any value of any knob is either
    //! accepted (and then within its bounds) or refused with a 4xx JSON
    //! error that names the field, and a refused request changes nothing.

    use proptest::prelude::*;
    use proptest::strategy::ValueTree;
    use stocklock::knobs::{DeductRequest, MAX_LEASE_MS, MAX_WAIT_MS, MAX_WORK_MS, MIN_LEASE_MS};

    use super::*;

    /// Values that stress a parser: digits, signs, huge numbers, unicode,
    /// control characters, long strings.
    fn nasty() -> impl Strategy<Value = String> {
        prop_oneof![
            "-?[0-9]{1,25}",
            "[+ ]?[0-9]{0,6}[.eE][0-9]{0,3}",
            "\\PC{0,12}",
            "[\\u{0}-\\u{1f}]{1,4}",
            "[a-zA-Z0-9_-]{60,200}",
            Just(String::new()),
        ]
    }

    fn field() -> impl Strategy<Value = &'static str> {
        prop_oneof![
            Just("sku"),
            Just("work_ms"),
            Just("lease_ms"),
            Just("wait_ms"),
            Just("request_id")
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn any_value_is_parsed_within_bounds_or_refused_by_name(name in field(), value in nasty()) {
            match DeductRequest::parse([(name, value.as_str())]) {
                Ok(request) => {
                    let knobs = &request.knobs;
                    prop_assert!(knobs.work.as_millis() <= u128::from(MAX_WORK_MS));
                    prop_assert!(knobs.lease.is_none_or(|l| (u128::from(MIN_LEASE_MS)..=u128::from(MAX_LEASE_MS)).contains(&l.as_millis())));
                    prop_assert!(knobs.wait.is_none_or(|w| w.as_millis() <= u128::from(MAX_WAIT_MS)));
                }
                Err(err) => {
                    prop_assert_eq!(err.field, name);
                    prop_assert!(err.reason.len() < 300);
                }
            }
        }
    }

    /// Through the whole router, against a real Redis: every generated
    /// request the parser refuses is a 4xx JSON error that leaves the SKU's
    /// state exactly as it was, in every variant.
    #[tokio::test]
    async fn any_refused_request_changes_nothing() {
        let redis = helpers::redis().await;
        let router = router(&redis.url()).await;
        reset(&router, "p1", 5).await;
        let before = state(&router, "p1").await;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let generated = proptest::collection::vec((field(), nasty()), 150)
            .new_tree(&mut runner)
            .unwrap()
            .current();
        let mut refused = 0;
        for (name, value) in &generated {
            let pairs = [("sku", "p1"), (*name, value.as_str())];
            let pairs = if *name == "sku" {
                &pairs[1..]
            } else {
                &pairs[..]
            };
            if DeductRequest::parse(pairs.iter().copied()).is_ok() {
                continue; // a valid value: not this test's business
            }
            refused += 1;
            let query: Vec<String> = pairs
                .iter()
                .map(|(k, v)| format!("{k}={}", url_encode(v)))
                .collect();
            for variant in Variant::ALL {
                let uri = format!("/deductStock/{variant}?{}", query.join("&"));
                let (status, body) = call(&router, get(&uri)).await;
                assert_eq!(status, 400, "{uri}: {body}");
                assert!(
                    body["detail"].as_str().unwrap().contains(name),
                    "{uri}: {body}"
                );
            }
        }
        assert!(
            refused > 50,
            "the generator produced too few bad values ({refused})"
        );
        assert_eq!(
            state(&router, "p1").await,
            before,
            "a refused request changed the state"
        );
    }

    fn url_encode(value: &str) -> String {
        value
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    }
}

/// An instance started without `--redlock-nodes` says so for `redlock`
/// (503, naming the flag) and changes nothing; the other variants still sell.
#[tokio::test]
async fn redlock_without_nodes_is_a_clear_503() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let router = stocklock::http::app(stocklock::http::AppState::new(
        store,
        stocklock::http::InstanceConfig {
            instance: "t".to_owned(),
            admin_token: TOKEN.to_owned(),
            default_variant: Variant::Lua,
            public_url: "http://127.0.0.1:9".to_owned(),
            own_url: "http://127.0.0.1:9".to_owned(),
            chaos: Chaos::off(),
            redlock_nodes: Vec::new(),
            request_ttl: stocklock::ledger::DEFAULT_REQUEST_TTL,
        },
        stocklock::lock::Wakeups::new(),
    ));
    reset(&router, "r", 3).await;
    let before = state(&router, "r").await;
    let (status, body) = call(&router, get("/deductStock/redlock?sku=r")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"], "not_configured");
    assert!(
        body["detail"].as_str().unwrap().contains("--redlock-nodes"),
        "{body}"
    );
    assert_eq!(
        state(&router, "r").await,
        before,
        "a refused request changed the SKU"
    );
    let (status, body) = call(&router, get("/deductStock/token?sku=r")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// A SKU no reset ever stocked is a 404 `unknown_sku` in every variant,
/// naming the SKU as the user wrote it.
#[tokio::test]
async fn a_sku_never_stocked_is_a_clear_404_in_every_variant() {
    let redis = helpers::redis().await;
    let router = router(&redis.url()).await;
    for variant in Variant::ALL {
        let (status, body) = call(
            &router,
            get(&format!("/deductStock/{variant}?sku=never-stocked")),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{variant}: {body}");
        assert_eq!(body["error"], "unknown_sku", "{variant}: {body}");
        let detail = body["detail"].as_str().unwrap();
        assert!(
            detail.starts_with("SKU \"never-stocked\" was never stocked"),
            "{variant}: {detail}"
        );
    }
}
