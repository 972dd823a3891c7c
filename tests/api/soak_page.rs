//! The soak page on a real stack: `/api/soak` answers 204 (no content) until
//! a soak's status is in Redis, then that status as it was written; `/soak`
//! is the page that follows it, linked from the dashboard.

use std::collections::BTreeMap;
use std::time::Duration;

use redis::AsyncCommands;
use stocklock::wire::{SOAK_STATUS_KEY, SoakStatus};

use crate::helpers::{self, Stack, within};

/// A soak half-way through its faults, one violation found.
fn status() -> SoakStatus {
    SoakStatus {
        seed: 42,
        minutes: 5.0,
        elapsed_s: 150.5,
        phase: "faults".to_owned(),
        requests: 12_345,
        sold: 678,
        unknowns: 9,
        unknowns_resolved: 7,
        faults: BTreeMap::from([
            ("kill-instance".to_owned(), 3),
            ("pause-redis".to_owned(), 2),
        ]),
        violations: BTreeMap::from([("setnx".to_owned(), 1)]),
        last_fault: Some("148.2 s kill-instance b".to_owned()),
        updated_ms: 1_700_000_000_000,
    }
}

#[tokio::test]
async fn the_soak_page_follows_the_status_a_soak_writes() {
    let stack = Stack::start(1, None).await;
    within(Duration::from_secs(60), async {
        let http = stack.http();
        let api = format!("{}/api/soak", stack.url);

        let none = http.get(&api).send().await.unwrap();
        assert_eq!(none.status(), 204);
        assert!(none.bytes().await.unwrap().is_empty());

        // Written as a running soak writes it: JSON, with a TTL.
        let written = status();
        let redis_url = stack
            .redis_url
            .as_deref()
            .expect("up started its own Redis");
        let mut conn = helpers::redis_conn(redis_url).await;
        let json = serde_json::to_string(&written).unwrap();
        let () = conn.set_ex(SOAK_STATUS_KEY, json, 60).await.unwrap();

        let running = http.get(&api).send().await.unwrap();
        assert_eq!(running.status(), 200);
        let read: SoakStatus = running.json().await.unwrap();
        assert_eq!(read, written);

        let page = http
            .get(format!("{}/soak", stack.url))
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), 200);
        let content_type = page.headers()["content-type"].to_str().unwrap().to_owned();
        assert!(content_type.starts_with("text/html"), "{content_type}");
        let html = page.text().await.unwrap();
        assert!(html.contains("<title>stocklock · soak</title>"), "{html}");
        for asset in ["soak.js", "soak.css"] {
            assert!(html.contains(&format!("/static/{asset}")), "{html}");
            let url = format!("{}/static/{asset}", stack.url);
            let served = http.get(url).send().await.unwrap();
            assert_eq!(served.status(), 200, "/static/{asset}");
        }

        let index = http.get(format!("{}/", stack.url)).send().await.unwrap();
        let index = index.text().await.unwrap();
        assert!(
            index.contains(r#"href="/soak""#),
            "the dashboard links to /soak"
        );
    })
    .await;
    helpers::node_check(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/static/soak.js")),
        false,
    );
    stack.stop().await;
}
