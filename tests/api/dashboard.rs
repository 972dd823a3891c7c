//! The dashboard's server side: the page (in-process), the live event
//! stream and the metrics (through nginx, on a real stack).

use std::time::Duration;

use futures_util::StreamExt;
use stocklock::store::Store;
use stocklock::variants::Variant;

use crate::helpers::{self, InProcess, Stack, burst};

#[tokio::test]
async fn the_page_renders_every_variant_escaped_with_its_assets() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let instance = InProcess::start(&store, "t<&>", stocklock::chaos::Chaos::off()).await;
    let (status, content_type, html) = instance.page("/").await;
    assert_eq!(status, 200);
    assert!(content_type.starts_with("text/html"), "{content_type}");
    for variant in Variant::ALL {
        assert!(
            html.contains(&format!("data-variant=\"{}\"", variant.name())),
            "no card for {variant}"
        );
        let info = variant.info();
        assert!(
            html.contains(&info.explanation_zh),
            "{variant}: no Chinese explanation"
        );
    }
    assert_eq!(html.matches("class=\"card\"").count(), Variant::ALL.len());
    for field in ["remaining", "sold", "oversold", "duplicates", "busy"] {
        assert_eq!(
            html.matches(&format!("data-field=\"{field}\"")).count(),
            Variant::ALL.len(),
            "{field}"
        );
    }
    // Text from the variants and the instance name is escaped, not markup.
    assert!(
        html.contains("SET lock &#60;token&#62; NX PX lease")
            || html.contains("SET lock &lt;token&gt; NX PX lease")
    );
    assert!(!html.contains("<token>"));
    assert!(!html.contains("t<&>"));
    assert!(html.contains("/static/app.js") && html.contains("/static/style.css"));
    // Controls: race all, reset all, chaos; per card run, reset, scenarios, delete lock.
    for id in [
        "race-all",
        "reset-all",
        "chaos-crash-after-acquire",
        "chaos-crash-after-write",
        "chaos-pause",
        "chaos-crash",
        "lang",
    ] {
        assert!(html.contains(&format!("id=\"{id}\"")), "no #{id}");
    }
    // Every card lists its claim in every scenario of the lab, and the
    // fail-fast locks say why they under-sell, in both languages.
    for scenario in stocklock::lab::Scenario::ALL {
        assert_eq!(
            html.matches(&format!("data-scenario=\"{}\"", scenario.name()))
                .count(),
            Variant::ALL.len(),
            "{scenario}"
        );
    }
    let undersells = Variant::ALL
        .iter()
        .filter(|v| v.info().undersells.is_some())
        .count();
    assert_eq!(undersells, 3, "setnx, setnx-expiry and token fail fast");
    assert_eq!(html.matches("class=\"undersells\"").count(), undersells);
    assert!(html.contains("快速失败"));
    for action in ["run", "reset", "scenarios", "clear-lock"] {
        assert_eq!(
            html.matches(&format!("data-action=\"{action}\"")).count(),
            Variant::ALL.len(),
            "{action}"
        );
    }

    let (status, content_type, js) = instance.page("/static/app.js").await;
    assert_eq!(
        (status.as_u16(), content_type.as_str()),
        (200, "text/javascript; charset=utf-8")
    );
    assert!(js.contains("EventSource('/api/events')"));
    let (status, content_type, _) = instance.page("/static/style.css").await;
    assert_eq!(
        (status.as_u16(), content_type.as_str()),
        (200, "text/css; charset=utf-8")
    );
}

#[test]
fn the_page_script_parses() {
    helpers::node_check(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/static/app.js")),
        false,
    );
}

/// One instance's `/metrics`, parsed.
async fn metrics_of(stack: &Stack, url: &str) -> Vec<(String, f64)> {
    let text = stack
        .http()
        .get(format!("{url}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    parse_prometheus(&text)
}

/// Parses the Prometheus text format strictly enough to catch a broken
/// page: `# HELP`/`# TYPE` comments, and `name{labels} value` samples.
/// Returns the samples as (name with labels, value).
fn parse_prometheus(text: &str) -> Vec<(String, f64)> {
    let mut samples = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(comment) = line.strip_prefix("# ") {
            let mut words = comment.split(' ');
            let kind = words.next().unwrap();
            assert!(kind == "HELP" || kind == "TYPE", "bad comment: {line}");
            if kind == "TYPE" {
                let _name = words.next().expect("TYPE names a metric");
                let family = words.next().expect("TYPE gives a type");
                assert!(
                    ["counter", "gauge", "histogram", "summary", "untyped"].contains(&family),
                    "{line}"
                );
            }
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no value: {line}"));
        let name_end = series.find('{').unwrap_or(series.len());
        let name = &series[..name_end];
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name in {line}"
        );
        if name_end < series.len() {
            assert!(series.ends_with('}'), "unclosed labels: {line}");
            for pair in series[name_end + 1..series.len() - 1].split(',') {
                let (label, quoted) = pair
                    .split_once('=')
                    .unwrap_or_else(|| panic!("bad label in {line}"));
                assert!(
                    label.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                    "{line}"
                );
                assert!(quoted.starts_with('"') && quoted.ends_with('"'), "{line}");
            }
        }
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value: {line}"));
        samples.push((series.to_owned(), value));
    }
    samples
}

/// The sum of one metric's samples whose labels contain every `needle`.
fn total(samples: &[(String, f64)], name: &str, needles: &[&str]) -> f64 {
    samples
        .iter()
        .filter(|(series, _)| {
            series.starts_with(&format!("{name}{{")) && needles.iter().all(|n| series.contains(n))
        })
        .map(|(_, v)| v)
        .sum()
}

#[tokio::test]
async fn metrics_parse_and_move_with_a_run_and_events_stream_through_nginx() {
    let stack = Stack::start(2, None).await;
    stack.reset("lua", 30).await;
    stack.reset("watchdog", 30).await;

    // Through nginx the stream is not buffered: the first board arrives.
    let response = stack
        .http()
        .get(format!("{}/api/events", stack.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut stream = response.bytes_stream();
    let mut seen = String::new();
    tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(chunk) = stream.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            if seen.contains("event: board")
                && seen.contains("\"sku\":\"lua\"")
                && seen.ends_with("\n\n")
            {
                break;
            }
        }
    })
    .await
    .expect("no board event within 10 s");
    assert!(seen.contains("\"remaining\":30"), "{seen}");
    drop(stream);

    // Metrics are per instance. Through nginx they would be a random
    // instance's, so nginx says where to scrape instead; `up` printed the
    // instances' own addresses as Prometheus targets.
    let through_nginx = stack
        .http()
        .get(format!("{}/metrics", stack.url))
        .send()
        .await
        .unwrap();
    assert_eq!(through_nginx.status(), 404);
    let why: serde_json::Value = through_nginx.json().await.unwrap();
    assert_eq!(why["error"], "scrape_each_instance", "{why}");
    assert!(
        why["detail"]
            .as_str()
            .unwrap()
            .contains("\"prometheus targets:\""),
        "{why}"
    );
    let own_addresses: Vec<&str> = stack
        .instances
        .iter()
        .map(|i| i.url.trim_start_matches("http://"))
        .collect();
    assert_eq!(stack.prometheus_targets, own_addresses);
    let config = stack
        .prometheus_config
        .as_deref()
        .expect("a prometheus.yml line");
    for target in &own_addresses {
        assert!(config.contains(&format!("'{target}'")), "{config}");
    }

    // Sum what both instances say, before and after a run.
    let scrape = || async {
        let mut all = Vec::new();
        for instance in &stack.instances {
            all.extend(metrics_of(&stack, &instance.url).await);
        }
        all
    };
    let before = scrape().await;
    let lua_url = format!("{}/deductStock/lua?sku=lua", stack.url);
    let tally = burst(stack.http(), &lua_url, 40, 8).await;
    let watchdog_url = format!("{}/deductStock/watchdog?sku=watchdog&work_ms=1", stack.url);
    burst(stack.http(), &watchdog_url, 20, 4).await;
    let after = scrape().await;

    let sold = r#"outcome="sold""#;
    let moved =
        |name: &str, needles: &[&str]| total(&after, name, needles) - total(&before, name, needles);
    assert_eq!(
        moved("stocklock_requests_total", &[r#"variant="lua""#, sold]),
        tally.count(200) as f64
    );
    assert_eq!(
        moved(
            "stocklock_requests_total",
            &[r#"variant="lua""#, r#"outcome="sold_out""#]
        ),
        10.0
    );
    assert_eq!(
        moved("stocklock_requests_total", &[r#"variant="watchdog""#]),
        20.0
    );
    // Every watchdog request waited for and held the lock once.
    assert_eq!(
        moved(
            "stocklock_lock_wait_seconds_count",
            &[r#"variant="watchdog""#]
        ),
        20.0
    );
    assert_eq!(
        moved(
            "stocklock_lock_hold_seconds_count",
            &[r#"variant="watchdog""#]
        ),
        20.0
    );
    // ... and each wait ended with the lock; nobody waits any more, and
    // the waiters were counted on the SKU they waited for.
    assert_eq!(
        moved(
            "stocklock_lock_wait_seconds_count",
            &[r#"variant="watchdog""#, r#"outcome="acquired""#]
        ),
        20.0
    );
    let waiters = r#"stocklock_lock_waiters{"#;
    assert!(
        after.iter().any(|(series, _)| series.starts_with(waiters)
            && series.contains(r#"variant="watchdog""#)
            && series.contains(r#"sku="watchdog""#)),
        "no waiters gauge for watchdog's SKU: {after:?}"
    );
    assert_eq!(
        total(&after, "stocklock_lock_waiters", &[r#"variant="watchdog""#]),
        0.0
    );
    // Each instance labels its own series.
    for instance in &stack.instances {
        let name = &instance.name;
        assert!(
            total(
                &after,
                "stocklock_requests_total",
                &[&format!(r#"instance="{name}""#)]
            ) > 0.0,
            "instance {name} has no requests in /metrics"
        );
    }
    waiters_and_given_up_waits_are_counted(&stack).await;
    stack.stop().await;
}

/// Under real contention: while instance a holds watchdog's lock, a buyer
/// on b who waits shows in b's waiters gauge, one who may not wait
/// (`wait_ms=0`) ends as a `gave_up` wait, and once the lock is free
/// nobody waits.
async fn waiters_and_given_up_waits_are_counted(stack: &Stack) {
    let (a, b) = (&stack.instances[0].url, &stack.instances[1].url);
    let metrics_of = |url: String| async move { metrics_of(stack, &url).await };
    let watchdog = r#"variant="watchdog""#;
    let on_sku = r#"sku="watchdog""#;
    let acquired = |samples: &[(String, f64)]| {
        total(
            samples,
            "stocklock_lock_wait_seconds_count",
            &[watchdog, r#"outcome="acquired""#],
        )
    };
    let gave_up = |samples: &[(String, f64)]| {
        total(
            samples,
            "stocklock_lock_wait_seconds_count",
            &[watchdog, r#"outcome="gave_up""#],
        )
    };
    let a_before = acquired(&metrics_of(a.clone()).await);
    let b_before = metrics_of(b.clone()).await;

    let sale = |url: String| {
        let http = stack.http().clone();
        tokio::spawn(async move { http.get(url).send().await.unwrap().status().as_u16() })
    };
    let holder = sale(format!(
        "{a}/deductStock/watchdog?sku=watchdog&work_ms=2000"
    ));
    // a holds the lock once its wait ended with it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while acquired(&metrics_of(a.clone()).await) == a_before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a never took the lock"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refused = stack
        .http()
        .get(format!("{b}/deductStock/watchdog?sku=watchdog&wait_ms=0"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    let waiter = sale(format!(
        "{b}/deductStock/watchdog?sku=watchdog&wait_ms=10000"
    ));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now = metrics_of(b.clone()).await;
        if total(&now, "stocklock_lock_waiters", &[watchdog, on_sku]) == 1.0 {
            assert_eq!(gave_up(&now) - gave_up(&b_before), 1.0);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline && !waiter.is_finished(),
            "b's waiter never showed in stocklock_lock_waiters: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(holder.await.unwrap(), 200);
    assert_eq!(waiter.await.unwrap(), 200);
    let b_after = metrics_of(b.clone()).await;
    assert_eq!(
        total(&b_after, "stocklock_lock_waiters", &[watchdog, on_sku]),
        0.0
    );
    assert_eq!(acquired(&b_after) - acquired(&b_before), 1.0);
}

#[tokio::test]
async fn runs_need_the_token_valid_input_and_take_turns() {
    let stack = Stack::start(2, None).await;
    let url = format!("{}/api/admin/run", stack.url);
    let run = serde_json::json!({"variants": ["lua"], "stock": 100000, "requests": 100000, "concurrency": 2});
    let post = |body: serde_json::Value, token: Option<&str>| {
        let mut request = stack.http().post(&url).json(&body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    let before = stack.state("lua").await;
    assert_eq!(post(run.clone(), None).await.unwrap().status(), 401);
    assert_eq!(
        post(run.clone(), Some("wrong")).await.unwrap().status(),
        401
    );
    for (field, bad) in [
        ("requests", 0),
        ("concurrency", 0),
        ("concurrency", 100000),
        ("stock", -1),
    ] {
        let mut body = run.clone();
        body[field] = serde_json::json!(bad);
        let response = post(body, Some(&stack.token)).await.unwrap();
        assert_eq!(response.status(), 400, "{field}={bad}");
        let answer: serde_json::Value = response.json().await.unwrap();
        assert!(
            answer["detail"].as_str().unwrap().contains(field),
            "{answer}"
        );
    }
    let mut unknown = run.clone();
    unknown["variants"] = serde_json::json!(["nope"]);
    assert_eq!(
        post(unknown, Some(&stack.token)).await.unwrap().status(),
        400
    );
    assert_eq!(
        stack.state("lua").await,
        before,
        "refused runs changed nothing"
    );

    // One run at a time, stack-wide: the second is refused while the first runs.
    let first = post(run.clone(), Some(&stack.token)).await.unwrap();
    assert_eq!(first.status(), 202);
    let first: serde_json::Value = first.json().await.unwrap();
    assert_eq!(first["state"], "running");
    assert_eq!(first["total"], 100000);
    let second = post(run.clone(), Some(&stack.token)).await.unwrap();
    assert_eq!(second.status(), 409);
    stack.stop().await;
}

/// `redlock`'s lock lives on its nodes, not on the main Redis: its card
/// reads it there, naming the holder and on how many nodes it holds.
#[tokio::test]
async fn the_redlock_card_shows_the_lock_as_its_nodes_hold_it() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let instance = InProcess::start(&store, "t", stocklock::chaos::Chaos::off()).await;
    let board = |instance: InProcess| async move {
        let (status, _, body) = instance.page("/api/board").await;
        assert_eq!(status, 200);
        let board: stocklock::wire::Board = serde_json::from_str(&body).unwrap();
        board
            .variants
            .into_iter()
            .find(|v| v.sku == "redlock")
            .unwrap()
            .lock
    };
    assert!(!board(instance.clone()).await.held);

    // The same five "nodes" the router uses.
    let lock = stocklock::lock::RedlockNodes::open(&helpers::redlock_on(&store))
        .unwrap()
        .lock("lock:{redlock}");
    let owner = stocklock::lock::OwnerId::new("x");
    lock.lock(&owner, Duration::from_secs(30), Duration::ZERO)
        .await
        .unwrap()
        .expect("a free lock");
    let shown = board(instance.clone()).await;
    assert!(shown.held, "{shown:?}");
    assert_eq!(
        shown.holder.as_deref(),
        Some(format!("{owner} (on 5 of 5 nodes)").as_str())
    );
    let ttl = shown.ttl_ms.unwrap();
    assert!(ttl > 25_000 && ttl <= 30_000, "{ttl}");
    assert_eq!(lock.unlock(&owner).await, 5);
    assert!(!board(instance).await.held);
}
