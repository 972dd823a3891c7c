//! The dashboard's server side: the page (in-process), the live event
//! stream and the metrics (through nginx, on a real stack: `metrics.rs`).

use std::time::Duration;

use futures_util::StreamExt;
use stocklock::store::Store;
use stocklock::variants::Variant;

use crate::helpers::{self, InProcess, Stack, burst};

mod fit;
pub(crate) mod metrics;

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
            html.contains(&stocklock::dashboard::code_spans(&info.explanation_zh)),
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
    assert_eq!(
        undersells, 4,
        "setnx, setnx-expiry and token fail fast; pg-optimistic gives a buyer up"
    );
    // The order variants' cards, and only theirs, have the order panel;
    // on an instance without the orders' database it says so once, and
    // the page never asks for orders (each ask was a 503 in the console).
    let order_variants = Variant::ALL.iter().filter(|v| v.orders()).count();
    assert_eq!(order_variants, 2, "lua-then-queue and lua-stream");
    assert_eq!(
        html.matches("data-field=\"orders-off\"").count(),
        order_variants
    );
    assert_eq!(html.matches("data-field=\"orders\"").count(), 0);
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

/// The etcd and zookeeper cards show the lock where it lives: the holder's
/// lease and revision (the fencing token) on etcd, with its time to live;
/// the holder's znode on ZooKeeper. Real servers, an in-process instance
/// given them.
#[tokio::test]
async fn the_etcd_and_zookeeper_cards_show_the_lock_where_it_lives() {
    let Some(mut etcd) = crate::etcd::one_member().await else {
        return;
    };
    let Some(zookeeper) = crate::zookeeper::Servers::start(1).await else {
        etcd.stop().await;
        return;
    };
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let wakeups = stocklock::lock::Wakeups::new();
    let instance = InProcess::with(
        &store,
        wakeups,
        stocklock::http::InstanceConfig {
            lock_stores: stocklock::lock::LockStoresConfig {
                redlock_nodes: Vec::new(),
                etcd_endpoints: etcd.urls(),
                zookeeper: Some(zookeeper.connect_string()),
            },
            ..helpers::in_process_config("t")
        },
    );
    let card = |instance: InProcess, sku: &'static str| async move {
        let (status, _, body) = instance.page("/api/board").await;
        assert_eq!(status, 200);
        let board: stocklock::wire::Board = serde_json::from_str(&body).unwrap();
        board
            .variants
            .into_iter()
            .find(|v| v.sku == sku)
            .unwrap()
            .lock
    };
    assert!(!card(instance.clone(), "etcd").await.held);
    assert!(!card(instance.clone(), "zookeeper").await.held);

    // A holder in each, working 3 s inside its section.
    for sku in ["etcd", "zookeeper"] {
        instance.reset(sku, 5, 0).await;
    }
    let holders: Vec<_> = ["etcd", "zookeeper"]
        .map(|sku| {
            let instance = instance.clone();
            tokio::spawn(async move {
                instance
                    .get(&format!(
                        "/deductStock/{sku}?sku={sku}&work_ms=3000&lease_ms=5000"
                    ))
                    .await
            })
        })
        .into_iter()
        .collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    let (etcd_card, zookeeper_card) = loop {
        let shown = (
            card(instance.clone(), "etcd").await,
            card(instance.clone(), "zookeeper").await,
        );
        if shown.0.held && shown.1.held {
            break shown;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the holders never showed: {shown:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let holder = etcd_card.holder.unwrap();
    assert!(
        holder.starts_with("lease ") && holder.contains("revision ") && holder.contains("1 queued"),
        "{holder}"
    );
    let ttl = etcd_card.ttl_ms.unwrap();
    assert!(ttl > 0 && ttl <= 5_000, "{ttl}");
    let znode = zookeeper_card.holder.unwrap();
    assert!(
        znode.starts_with("/stocklock/locks/lock:zookeeper/") && znode.contains("-lock-"),
        "{znode}"
    );
    for holder in holders {
        let (status, body) = holder.await.unwrap();
        assert_eq!(status, 200, "{body}");
    }
    assert!(!card(instance.clone(), "etcd").await.held);
    assert!(!card(instance, "zookeeper").await.held);
    zookeeper.stop().await;
    etcd.stop().await;
}
