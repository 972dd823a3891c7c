//! The compose stack's nginx, run for real: the host's browser reaches it
//! from the Docker network, never from nginx's own 127.0.0.1, so the
//! compose file opens `/api/admin/` to every client (and publishes the
//! port on the host's loopback only, `compose.rs`). What then guards the
//! admin routes is the instances' token: a client from another address
//! (here 127.0.0.2, standing for the Docker network's gateway) is served
//! with the token, gets 401 without it, and a forged X-Forwarded-For gains
//! it nothing. `up`'s loopback-only config, beside it, refuses that same
//! client with the token: the two differ only in STOCKLOCK_ADMIN_ALLOW.

use std::future::IntoFuture;
use std::net::{IpAddr, SocketAddr};

use serde_json::json;
use stocklock::chaos::Chaos;
use stocklock::store::Store;
use stocklock::up::nginx::{LOOPBACK_ONLY, Nginx};

use super::*;
use crate::helpers::{ADMIN_TOKEN, InProcess};

/// `POST /api/admin/reset` giving `lua` `stock`, from `client`, with these
/// headers: the status and the JSON body (nginx's errors are JSON too).
async fn reset(
    client: &reqwest::Client,
    front: SocketAddr,
    stock: i64,
    headers: &[(&str, &str)],
) -> (u16, serde_json::Value) {
    let mut request = client
        .post(format!("http://{front}/api/admin/reset"))
        .json(&json!({"sku": "lua", "stock": stock}));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("nginx answers");
    let status = response.status().as_u16();
    (status, response.json().await.expect("a JSON body"))
}

#[tokio::test]
async fn compose_nginx_serves_admin_to_another_address_with_the_token_only() {
    if nginx_binary().is_none() {
        skipped(
            "compose_nginx_serves_admin_to_another_address_with_the_token_only: \
             nginx is not installed (apt-get install nginx)",
        );
        return;
    }
    let compose_text = read(&project_file("docker-compose.yml"));
    let service =
        service_block(&compose_text, "nginx").expect("an nginx service in docker-compose.yml");
    let compose_allow = environment_value(&service, "STOCKLOCK_ADMIN_ALLOW")
        .unwrap_or_else(|| panic!("no STOCKLOCK_ADMIN_ALLOW in the nginx service:\n{service}"));

    // One real instance on a real Redis, on a real socket.
    let redis = crate::helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let instance = InProcess::start(&store, "a", Chaos::off()).await;
    instance.reset("lua", 5, 0).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = listener.local_addr().unwrap();
    let server = tokio::spawn(axum::serve(listener, instance.0.clone()).into_future());

    let outsider = reqwest::Client::builder()
        .local_address(IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap();
    let bearer = format!("Bearer {ADMIN_TOKEN}");
    let with_token = [("authorization", bearer.as_str())];
    let forged = [("x-forwarded-for", "127.0.0.1"), ("x-real-ip", "127.0.0.1")];
    let forged_with_a_wrong_token = [
        ("x-forwarded-for", "127.0.0.1"),
        ("x-real-ip", "127.0.0.1"),
        ("authorization", "Bearer not-the-token"),
    ];

    // The compose config.
    let dir = tempfile::tempdir().unwrap();
    let front: SocketAddr = with_free_port("127.0.0.1:8080").parse().unwrap();
    let mut nginx = Nginx::start_with(dir.path(), front, &[upstream], &compose_allow)
        .await
        .expect("nginx with the compose config");
    for (headers, what) in [
        (&[][..], "no token"),
        (&forged[..], "a forged X-Forwarded-For"),
        (
            &forged_with_a_wrong_token[..],
            "a forged X-Forwarded-For and a wrong token",
        ),
    ] {
        let (status, body) = reset(&outsider, front, 1, headers).await;
        assert_eq!(status, 401, "{what}: {body}");
        assert_eq!(
            instance.state("lua").await.remaining,
            5,
            "{what} changed the stock"
        );
    }
    let (status, body) = reset(&outsider, front, 7, &with_token).await;
    assert_eq!(status, 200, "the token from another address: {body}");
    assert_eq!(instance.state("lua").await.remaining, 7);
    nginx.stop().await;

    // `up`'s config: the same client, the same token, refused by nginx.
    let dir = tempfile::tempdir().unwrap();
    let front: SocketAddr = with_free_port("127.0.0.1:8080").parse().unwrap();
    let mut nginx = Nginx::start_with(dir.path(), front, &[upstream], LOOPBACK_ONLY)
        .await
        .expect("nginx with up's config");
    let (status, body) = reset(&outsider, front, 3, &with_token).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"], "forbidden");
    assert_eq!(
        instance.state("lua").await.remaining,
        7,
        "a refused reset changed the stock"
    );
    // ... while from 127.0.0.1 it goes through.
    let (status, body) = reset(&reqwest::Client::new(), front, 3, &with_token).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(instance.state("lua").await.remaining, 3);
    nginx.stop().await;

    server.abort();
}
