//! The instances' metrics as a run and lock contention move them.

use super::*;

/// One instance's `/metrics`, parsed.
pub(crate) async fn metrics_of(stack: &Stack, url: &str) -> Vec<(String, f64)> {
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
