//! What chaos mode allows: without it the chaos route is refused, and
//! `up`'s Redis refuses DEBUG and CONFIG.

use serde_json::Value;

use crate::helpers::Stack;

#[tokio::test]
async fn chaos_is_refused_without_chaos_mode_and_without_the_token() {
    let stack = Stack::start_with(1, None, &["--no-chaos"]).await;
    let url = format!("{}/api/admin/chaos", stack.url);
    let arm = serde_json::json!({"action": "crash_after_setnx"});
    let without = stack.http().post(&url).json(&arm).send().await.unwrap();
    assert_eq!(without.status(), 401);
    let refused = stack
        .http()
        .post(&url)
        .bearer_auth(&stack.token)
        .json(&arm)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"], "forbidden");
    stack.stop().await;
}

/// Without chaos mode, `up`'s Redis refuses DEBUG (a client could pause it
/// with DEBUG SLEEP) and CONFIG (a client could turn persistence, memory
/// limits or anything else off); with it, chaos's "pause Redis" has DEBUG.
#[tokio::test]
async fn without_chaos_up_s_redis_refuses_debug_and_config() {
    for (mode, refused) in [("--no-chaos", true), ("--chaos", false)] {
        let stack = Stack::start_with(1, None, &[mode]).await;
        let mut conn = crate::helpers::redis_conn(stack.redis_url.as_deref().unwrap()).await;
        let debug: redis::RedisResult<String> = redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg(0)
            .query_async(&mut conn)
            .await;
        let config: redis::RedisResult<Vec<String>> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxmemory")
            .query_async(&mut conn)
            .await;
        assert_eq!(debug.is_err(), refused, "{mode}: DEBUG answered {debug:?}");
        assert_eq!(
            config.is_err(),
            refused,
            "{mode}: CONFIG answered {config:?}"
        );
        // Everything else is served as before.
        let pong: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
        assert_eq!(pong, "PONG");
        stack.stop().await;
    }
}
