//! Bad input, driven in-process against a real Redis: every kind of bad
//! request (a listed corpus, then a generated one) gets a 4xx JSON error
//! that names what was wrong and changes nothing; a SKU never stocked is a
//! clear 404 in every variant.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use stocklock::chaos::Chaos;
use stocklock::store::Store;
use stocklock::variants::Variant;

use crate::helpers::{self, InProcess};

#[tokio::test]
async fn bad_input_is_a_4xx_json_error_and_changes_nothing() {
    let redis = helpers::redis().await;
    let instance = InProcess::start(&Store::open(&redis.url()).unwrap(), "t", Chaos::off()).await;
    instance.reset("00001", 5, 0).await;
    instance.reset("s1", 5, 0).await;
    let before = (instance.state("00001").await, instance.state("s1").await);

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
            "/deductStock/lua?sku=s1&sold_out_mark=yes".into(),
            400,
            "sold_out_mark",
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
        let (status, body) = instance.get(uri).await;
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
    let (status, body) = instance.get("/deductStock/nope").await;
    assert_eq!(status, 404);
    assert_eq!(body["valid"].as_array().unwrap().len(), Variant::ALL.len());
    assert!(body["detail"].as_str().unwrap().contains("watchdog"));

    let (status, body) = instance
        .call(
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
        let (status, body) = instance.reset_with(good, auth).await;
        assert_eq!(status, 401, "{auth:?}: {body}");
    }
    let bearer = format!("Bearer {}", helpers::ADMIN_TOKEN);
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
        let (status, answer) = instance.reset_with(body, Some(&bearer)).await;
        assert!(status.is_client_error(), "{body}: {status} {answer}");
        let text = answer.to_string();
        assert!(
            text.contains(named),
            "{body}: answer does not name {named}: {answer}"
        );
    }

    let after = (instance.state("00001").await, instance.state("s1").await);
    assert_eq!(before, after, "bad input changed the state");
}

/// A SKU no reset ever stocked is a 404 `unknown_sku` in every variant,
/// naming the SKU as the user wrote it.
#[tokio::test]
async fn a_sku_never_stocked_is_a_clear_404_in_every_variant() {
    let redis = helpers::redis().await;
    let instance = InProcess::start(&Store::open(&redis.url()).unwrap(), "t", Chaos::off()).await;
    for variant in crate::helpers::in_process_variants() {
        let (status, body) = instance
            .get(&format!("/deductStock/{variant}?sku=never-stocked"))
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
            Just("request_id"),
            Just("sold_out_mark")
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
        let instance =
            InProcess::start(&Store::open(&redis.url()).unwrap(), "t", Chaos::off()).await;
        instance.reset("p1", 5, 0).await;
        let before = instance.state("p1").await;
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
                let (status, body) = instance.get(&uri).await;
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
            instance.state("p1").await,
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
