//! The per-client rate limit (`serve --rate-limit`), on a real instance
//! behind up's real nginx: a client at 127.0.0.2 (not exempt: only exactly
//! 127.0.0.1 and ::1 are) is refused with 429 `rate_limited` past its
//! budget on every public route that does work, while 127.0.0.1 never is;
//! a forged X-Real-IP changes nobody's budget, whether it passes nginx
//! (which overwrites it) or goes straight to the instance (which believes
//! it only from 127.0.0.1). The budget is 3 an hour, so the refill (one
//! per 20 minutes) can never land inside a test.

use std::future::IntoFuture;
use std::net::{IpAddr, SocketAddr};

use serde_json::{Value, json};
use stocklock::http::{AppState, app_limited, limit};
use stocklock::lock::Wakeups;
use stocklock::store::Store;
use stocklock::up::nginx::{LOOPBACK_ONLY, Nginx};

use crate::helpers::{ADMIN_TOKEN, in_process_config, missing_tool};

const BUDGET: usize = 3;

/// One instance on a real socket (peer addresses known), limited to
/// `BUDGET` an hour per client, with `stock` units of SKU `rl`.
async fn limited_instance(
    stock: i64,
) -> (
    stocklock::up::redis::RedisServer,
    SocketAddr,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let redis = crate::helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let wakeups = Wakeups::new();
    let state = AppState::new(store, in_process_config("a"), wakeups);
    let rate = limit::parse_budget(&format!("{BUDGET}/h")).unwrap().0;
    let app = app_limited(state, rate).into_make_service_with_connect_info::<SocketAddr>();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(axum::serve(listener, app).into_future());
    let (status, body) = send(
        &reqwest::Client::new(),
        reqwest::Method::POST,
        &format!("http://{addr}/api/admin/reset"),
        &[("authorization", &format!("Bearer {ADMIN_TOKEN}"))],
        Some(json!({"sku": "rl", "stock": stock})),
    )
    .await;
    assert_eq!(status, 200, "reset: {body}");
    (redis, addr, server)
}

fn client_at(ip: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(IpAddr::from(ip))
        .build()
        .unwrap()
}

/// The status, the Retry-After header (if any) and the JSON body.
async fn send(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, Value) {
    let (status, _, body) = send_full(client, method, url, headers, body).await;
    (status, body)
}

async fn send_full(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, Option<String>, Value) {
    let mut request = client.request(method, url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("an answer");
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    (
        status,
        retry_after,
        response.json().await.expect("a JSON body"),
    )
}

async fn deduct(client: &reqwest::Client, base: SocketAddr, headers: &[(&str, &str)]) -> u16 {
    let url = format!("http://{base}/deductStock/lua?sku=rl");
    send(client, reqwest::Method::GET, &url, headers, None)
        .await
        .0
}

async fn remaining(base: SocketAddr) -> i64 {
    let url = format!("http://{base}/api/state?sku=rl");
    let (status, body) = send(
        &reqwest::Client::new(),
        reqwest::Method::GET,
        &url,
        &[],
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["remaining"].as_i64().expect("remaining")
}

#[tokio::test]
async fn a_remote_client_through_nginx_is_limited_and_loopback_never_is() {
    if stocklock::os::find_program("nginx").is_none()
        && !std::path::Path::new("/usr/sbin/nginx").exists()
    {
        missing_tool(
            "a_remote_client_through_nginx_is_limited_and_loopback_never_is: nginx is not installed",
        );
        return;
    }
    let (_redis, upstream, server) = limited_instance(100).await;
    let dir = tempfile::tempdir().unwrap();
    let front: SocketAddr = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap()
    };
    let mut nginx = Nginx::start_with(dir.path(), front, &[upstream], LOOPBACK_ONLY)
        .await
        .expect("nginx with up's config");
    let outsider = client_at([127, 0, 0, 2]);

    for n in 1..=BUDGET {
        assert_eq!(
            deduct(&outsider, front, &[]).await,
            200,
            "request {n} within the budget"
        );
    }
    let url = format!("http://{front}/deductStock/lua?sku=rl");
    let (status, retry_after, body) =
        send_full(&outsider, reqwest::Method::GET, &url, &[], None).await;
    assert_eq!(status, 429, "past the budget: {body}");
    assert_eq!(body["error"], "rate_limited", "{body}");
    assert!(
        body["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "{body}"
    );
    let retry_after: u64 = retry_after.expect("a Retry-After header").parse().unwrap();
    assert!(
        (1..=3600).contains(&retry_after),
        "Retry-After {retry_after}"
    );
    assert_eq!(
        remaining(front).await,
        100 - BUDGET as i64,
        "a refused request sold"
    );

    // nginx overwrites the header: forging loopback gains nothing.
    let forged = [("x-real-ip", "127.0.0.1"), ("x-forwarded-for", "127.0.0.1")];
    assert_eq!(
        deduct(&outsider, front, &forged).await,
        429,
        "a forged X-Real-IP"
    );
    // Every public route that does work is limited; the cheap ones are not.
    for path in [
        "/api/timeline?sku=rl",
        "/api/timeline/export?sku=rl",
        "/api/orders",
        "/api/orders/find?id=1",
    ] {
        let (status, body) = send(
            &outsider,
            reqwest::Method::GET,
            &format!("http://{front}{path}"),
            &[],
            None,
        )
        .await;
        assert_eq!(
            (status, body["error"].as_str()),
            (429, Some("rate_limited")),
            "{path}: {body}"
        );
    }
    let (status, body) = send(
        &outsider,
        reqwest::Method::POST,
        &format!("http://{front}/api/orders/1/pay"),
        &[],
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 429, "pay: {body}");
    let (status, body) = send(
        &outsider,
        reqwest::Method::GET,
        &format!("http://{front}/api/state?sku=rl"),
        &[],
        None,
    )
    .await;
    assert_eq!(status, 200, "state is not limited: {body}");
    // The admin token is never limited.
    let bearer = format!("Bearer {ADMIN_TOKEN}");
    assert_eq!(
        deduct(&outsider, front, &[("authorization", &bearer)]).await,
        200,
        "with the admin token"
    );

    // 127.0.0.1 (load, bench, lab, the tests) is never limited.
    let local = client_at([127, 0, 0, 1]);
    for n in 1..=4 * BUDGET {
        assert_eq!(
            deduct(&local, front, &[]).await,
            200,
            "loopback request {n}"
        );
    }
    assert_eq!(remaining(front).await, 100 - 5 * BUDGET as i64 - 1);

    nginx.stop().await;
    server.abort();
}

#[tokio::test]
async fn a_forged_real_ip_straight_to_the_instance_changes_nobodys_budget() {
    let (_redis, instance, server) = limited_instance(100).await;
    // From a peer that is not this machine's nginx, the header is ignored.
    let outsider = client_at([127, 0, 0, 2]);
    let forged = [("x-real-ip", "127.0.0.1")];
    for n in 1..=BUDGET {
        assert_eq!(
            deduct(&outsider, instance, &forged).await,
            200,
            "request {n}"
        );
    }
    assert_eq!(
        deduct(&outsider, instance, &forged).await,
        429,
        "claiming to be 127.0.0.1"
    );
    // Another address has its own budget, whatever it claims to be.
    let other = client_at([127, 0, 0, 3]);
    let claims_outsider = [("x-real-ip", "127.0.0.2")];
    assert_eq!(
        deduct(&other, instance, &claims_outsider).await,
        200,
        "127.0.0.3's own budget"
    );
    // From 127.0.0.1 (nginx's place) the header names the client.
    let via_local = [("x-real-ip", "127.0.0.2")];
    assert_eq!(
        deduct(&client_at([127, 0, 0, 1]), instance, &via_local).await,
        429,
        "127.0.0.2 forwarded by loopback"
    );
    assert_eq!(remaining(instance).await, 100 - BUDGET as i64 - 1);
    server.abort();
}
