//! The timeline's endpoint and export on a real Redis: every section of a
//! run, always recorded; its overlaps; the lease, the renewals and the
//! chaos events; the export as one self-contained file; bad input refused.

use std::time::Duration;

use serde_json::json;
use stocklock::chaos::Chaos;
use stocklock::http::{AppState, app};
use stocklock::knobs::Sku;
use stocklock::lock::Wakeups;
use stocklock::store::{Keys, Store};
use stocklock::timeline::{self, Timeline};

use crate::helpers::{self, ADMIN_TOKEN, InProcess, within};

/// `n` buyers of `uri` at once; every answer's status.
async fn crowd(instance: &InProcess, n: usize, uri: &str) -> Vec<u16> {
    let buyers: Vec<_> = (0..n)
        .map(|_| {
            let (instance, uri) = (instance.clone(), uri.to_owned());
            tokio::spawn(async move { instance.get(&uri).await.0.as_u16() })
        })
        .collect();
    let mut statuses = Vec::new();
    for buyer in buyers {
        statuses.push(buyer.await.unwrap());
    }
    statuses
}

async fn timeline_of(instance: &InProcess, query: &str) -> Timeline {
    let (status, body) = instance.get(&format!("/api/timeline?{query}")).await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_value(body).unwrap()
}

#[tokio::test]
async fn every_section_is_recorded_without_chaos_mode_with_its_overlaps_lease_and_renewals() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    // Chaos off: the timeline records all the same.
    let instance = InProcess::start(&store, "t", Chaos::off()).await;
    within(Duration::from_secs(60), async {
        // No lock at all, work 100 ms: the three buyers are in the section together.
        instance.reset("none", 5, 0).await;
        let statuses = crowd(&instance, 3, "/deductStock/none?sku=none&work_ms=100").await;
        assert_eq!(statuses, [200, 200, 200]);
        let t = timeline_of(&instance, "sku=none").await;
        assert_eq!(t.sections.len(), 3, "{t:?}");
        assert_eq!(
            t.overlaps.len(),
            3,
            "three sections, each overlapping the others"
        );
        assert_eq!(t.verdict, format!("OVERSOLD {}", t.state.oversold));
        assert!(t.state.oversold > 0);
        for s in &t.sections {
            assert!(
                s.enter_ns + 100_000_000 <= s.exit_ns,
                "the work is inside: {s:?}"
            );
            assert!(s.exit_ns <= s.release_ns.unwrap());
            assert_eq!((s.outcome.as_ref(), s.instance.as_str()), ("sold", "t"));
            assert!(s.unit.is_some());
        }
        assert!(t.from_ns <= t.sections[0].enter_ns && t.sections[2].exit_ns <= t.to_ns);
        assert!(
            t.events
                .iter()
                .any(|e| e.kind == "reset" && e.sku.as_deref() == Some("none"))
        );
        // The witness's count is the endpoint's.
        let mut conn = store.conn().await.unwrap();
        let keys = Keys::new(&Sku::parse("none").unwrap());
        let recorded = timeline::sections(&mut conn, &keys).await.unwrap();
        assert_eq!(timeline::overlap_count(&recorded), t.overlap_count);
        assert_eq!(t.overlaps, timeline::overlaps(&recorded, usize::MAX));

        // The watchdog renews a 150 ms lease under 400 ms of work, one holder at a time.
        instance.reset("watchdog", 5, 0).await;
        let uri = "/deductStock/watchdog?sku=watchdog&lease_ms=150&work_ms=400&wait_ms=5000";
        assert_eq!(crowd(&instance, 2, uri).await, [200, 200]);
        let t = timeline_of(&instance, "sku=watchdog").await;
        assert_eq!((t.sections.len(), t.overlaps.len()), (2, 0), "{t:?}");
        for s in &t.sections {
            assert_eq!(s.lease_ms, Some(150));
            assert!(
                s.holder.as_deref().is_some_and(|h| h.starts_with("t:")),
                "{s:?}"
            );
            assert!(s.renewals_ns.len() >= 2, "renewed under the work: {s:?}");
            // Placed on the timeline's clock from the process's own: within a millisecond.
            let (from, to) = (s.enter_ns - 1_000_000, s.exit_ns + 1_000_000);
            assert!(s.renewals_ns.iter().all(|&r| from <= r && r <= to), "{s:?}");
        }

        // lua: the script's own run inside Redis, one at a time.
        instance.reset("lua", 20, 0).await;
        crowd(&instance, 30, "/deductStock/lua?sku=lua").await;
        let t = timeline_of(&instance, "sku=lua").await;
        assert!(
            t.sections.len() >= 20 && t.sections.iter().all(|s| s.atomic),
            "{t:?}"
        );
        assert_eq!(
            t.sections.iter().filter(|s| s.outcome == "sold").count(),
            20
        );
        assert!(t.overlaps.is_empty());
        // Reset with the timeline off: the scripts record nothing.
        let body = json!({"sku": "untimed", "stock": 5, "timeline": false}).to_string();
        let (status, _) = instance
            .reset_with(&body, Some(&format!("Bearer {ADMIN_TOKEN}")))
            .await;
        assert_eq!(status, 200);
        crowd(&instance, 5, "/deductStock/lua?sku=untimed").await;
        let t = timeline_of(&instance, "sku=untimed").await;
        assert_eq!((t.state.sold, t.sections.len()), (5, 0), "{t:?}");
        // The last seconds only: nothing older.
        let t = timeline_of(&instance, "sku=none&seconds=1").await;
        assert!(t.sections.iter().all(|s| s.exit_ns >= t.from_ns));
    })
    .await;
}

/// An in-process instance called `name` whose listener hears the calls
/// to count in, as a real instance's does. Its background tasks (the count
/// every second, the answers to those calls) are the caller's to start.
async fn hearing(store: &Store, name: &str) -> (InProcess, AppState) {
    let wakeups = Wakeups::new().also_hearing(stocklock::sale::CHANNELS);
    // Lives as long as the test's runtime.
    let _listener = wakeups.listen(store.client().clone());
    wakeups.subscribed().await;
    let state = AppState::new(store.clone(), helpers::in_process_config(name), wakeups);
    (InProcess(app(state.clone())), state)
}

/// A timeline read waits a second at most for every instance to hand in
/// the sections it keeps. Instance b is late (subscribed, but neither
/// counting in nor answering the call, as when frozen or starved under
/// load): the read through a comes back without b's section and says so;
/// once b answers, the next read has it. A reader that draws or judges
/// the timeline (the lessons page, the lab) needs to know which it got.
#[tokio::test]
async fn a_timeline_read_says_whether_every_instance_had_handed_in_its_sections() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let (a, a_state) = hearing(&store, "a").await;
    let (b, b_state) = hearing(&store, "b").await;
    let mut tasks = a_state.start_background();
    within(Duration::from_secs(60), async {
        a.reset("none", 5, 0).await;
        let (status, body) = b.get("/deductStock/none?sku=none").await;
        assert_eq!(status, 200, "{body}");

        let (status, late) = a.get("/api/timeline?sku=none").await;
        assert_eq!(status, 200, "{late}");
        assert_eq!(late["sections"], json!([]), "b kept its section: {late}");
        assert_eq!(
            late["counted_in"],
            json!(false),
            "a timeline without b's section must say b was late: {late}"
        );

        // b comes back: it answers the next call, its section with it.
        tasks.extend(b_state.start_background());
        let t = timeline_of(&a, "sku=none").await;
        assert!(t.counted_in, "{t:?}");
        let from: Vec<&str> = t.sections.iter().map(|s| s.instance.as_str()).collect();
        assert_eq!(from, ["b"], "{t:?}");
        let keys = Keys::new(&Sku::parse("none").unwrap());
        let mut conn = store.conn().await.unwrap();
        let stored = timeline::sections(&mut conn, &keys).await.unwrap();
        assert_eq!(stored, t.sections, "the read shows what Redis holds");
    })
    .await;
    for task in tasks {
        task.abort();
    }
}

#[tokio::test]
async fn chaos_events_land_on_the_timeline_of_their_sku() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let instance = InProcess::start(&store, "t", Chaos::on(0)).await;
    instance.reset("token", 5, 0).await;
    let request = axum::http::Request::post("/api/admin/chaos")
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
        .body(axum::body::Body::from(
            json!({"action": "lock_vanishes", "sku": "token"}).to_string(),
        ))
        .unwrap();
    let (status, body) = instance.call(request).await;
    assert_eq!(status, 200, "{body}");
    let t = timeline_of(&instance, "sku=token").await;
    let kinds: Vec<&str> = t.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["reset", "lock_vanishes"], "{t:?}");
    // Another SKU's timeline does not show it.
    instance.reset("setnx", 5, 0).await;
    let t = timeline_of(&instance, "sku=setnx").await;
    assert!(t.events.iter().all(|e| e.kind != "lock_vanishes"), "{t:?}");
}

#[tokio::test]
async fn the_export_is_one_self_contained_html_file() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let instance = InProcess::start(&store, "t", Chaos::off()).await;
    instance.reset("none", 3, 0).await;
    crowd(&instance, 2, "/deductStock/none?sku=none&work_ms=50").await;
    let response = instance
        .send(
            axum::http::Request::get("/api/timeline/export?sku=none")
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-disposition"],
        "attachment; filename=\"stocklock-timeline-none.html\""
    );
    use http_body_util::BodyExt;
    let html = String::from_utf8(
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap();
    // Nothing fetched from elsewhere: no external script, style or image.
    for external in [
        "<script src",
        "<link",
        "<img",
        "@import",
        "http://",
        "https://",
    ] {
        assert!(!html.contains(external), "{external} in the export");
    }
    assert!(
        html.contains("StocklockTimeline"),
        "the drawing script is inline"
    );
    // The data is in it, as the endpoint serves it.
    let start = html.find("\"sections\":").expect("the data");
    assert!(html[start..].contains("\"outcome\":\"sold\""));
}

/// The body of `GET uri`, whole, and how long it took.
async fn body_of(instance: &InProcess, uri: &str) -> (Vec<u8>, Duration) {
    use http_body_util::BodyExt;
    let started = std::time::Instant::now();
    let request = axum::http::Request::get(uri)
        .body(axum::body::Body::empty())
        .unwrap();
    let response = instance.send(request).await;
    assert_eq!(response.status(), 200, "{uri}");
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (body.to_vec(), started.elapsed())
}

/// The most sections a timeline holds, every one overlapping every other
/// (no lock, a long work): 5·10^7 pairs, which the endpoint and its export
/// count without listing, in a body of bounded size.
#[tokio::test]
async fn a_full_timeline_of_overlapping_sections_answers_in_bounded_size() {
    /// 10 000 sections with the longest request ids are ~2.8 MB of JSON.
    const MAX_BODY: usize = 6 << 20;
    let n = timeline::KEEP;
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let instance = InProcess::start(&store, "t", Chaos::off()).await;
    instance.reset("none", 5, 0).await;
    let keys = Keys::new(&Sku::parse("none").unwrap());
    let mut conn = store.conn().await.unwrap();
    let start = timeline::now_ns();
    let sections: Vec<timeline::Section> = (0..n)
        .map(|i| {
            let mut s =
                timeline::Section::timed(if i % 2 == 0 { "a" } else { "b" }, None, 0, "sold");
            // Each entered a microsecond after the last, all still working a minute on.
            s.enter_ns = start + i as u64 * 1_000;
            s.exit_ns = start + 60_000_000_000;
            s.unit = Some(i as i64);
            s.request_id = Some(format!("{i:0>128}"));
            s
        })
        .collect();
    // One batch per count-in, as the instances append them.
    for (number, batch) in (1..).zip(sections.chunks(100)) {
        let count = stocklock::ledger::CountIn {
            number,
            sections: batch.to_vec(),
            ..Default::default()
        };
        stocklock::ledger::count_in(&mut conn, &keys, "t", "t:test", &count)
            .await
            .unwrap();
    }
    within(Duration::from_secs(60), async {
        let all = n * (n - 1) / 2;
        let (body, took) = body_of(&instance, "/api/timeline?sku=none").await;
        eprintln!("timeline of {n} sections: {} bytes in {took:?}", body.len());
        assert!(body.len() < MAX_BODY, "{} bytes", body.len());
        // A generous bound for a debug build on a shared machine: the old
        // listing of every pair took minutes and a gigabyte.
        assert!(took < Duration::from_secs(5), "{took:?}");
        let t: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(t["sections"].as_array().unwrap().len(), n);
        assert_eq!(t["overlap_count"], json!(all));
        let pairs = t["overlaps"].as_array().unwrap();
        assert_eq!(pairs.len(), timeline::MAX_PAIRS);
        assert_eq!(pairs[0], json!([0, 1]));

        let (html, took) = body_of(&instance, "/api/timeline/export?sku=none").await;
        eprintln!("export of {n} sections: {} bytes in {took:?}", html.len());
        // The data, plus the drawing script and the styles.
        assert!(html.len() < MAX_BODY + (1 << 20), "{} bytes", html.len());
        let html = String::from_utf8(html).unwrap();
        assert!(
            html.contains(&format!("<td>{all}</td>")),
            "the pairs counted"
        );
    })
    .await;
}

#[tokio::test]
async fn bad_timeline_queries_get_a_clear_400() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let instance = InProcess::start(&store, "t", Chaos::off()).await;
    for (query, field) in [
        ("", "sku"),
        ("sku=", "sku"),
        ("sku=a%20b", "sku"),
        ("sku=lua&seconds=0", "seconds"),
        ("sku=lua&seconds=86401", "seconds"),
        ("sku=lua&seconds=x", "seconds"),
        ("sku=lua&sku=none", "sku"),
        ("sku=lua&colour=red", "colour"),
    ] {
        for path in ["/api/timeline", "/api/timeline/export"] {
            let (status, body) = instance.get(&format!("{path}?{query}")).await;
            assert_eq!(status, 400, "{path}?{query}: {body}");
            assert_eq!(body["error"], json!("invalid_input"), "{body}");
            assert!(
                body["detail"].as_str().unwrap().contains(field),
                "{path}?{query}: {body}"
            );
        }
    }
}

/// The page's drawing script computes the overlaps itself (to highlight
/// them): its pure functions, tested with node on the Rust rule's cases;
/// and the lessons' script and the checker's (check.js) parse.
#[test]
fn the_timeline_script_counts_overlaps_as_the_witness_does() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for script in [
        "common.js",
        "lessons.js",
        "check.js",
        "timeline_page.js",
        "timeline.js",
    ] {
        helpers::node_check(&root.join("static").join(script), false);
    }
    let Some(node) = stocklock::os::find_program("node") else {
        helpers::missing_tool("node scripts/timeline_test.js: node is not installed");
        return;
    };
    let out = std::process::Command::new(node)
        .arg(root.join("scripts/timeline_test.js"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(" 0 failed"), "{text}");
}
