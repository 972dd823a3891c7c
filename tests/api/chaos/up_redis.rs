//! Chaos on the Redis that `up` owns: paused, restarted, and shut down
//! again while it loads.

use std::time::Duration;

use crate::helpers::{self, Stack};

/// Chaos on the Redis that `up` owns: a pause turns sales into 503s for its
/// length, a restart brings Redis back empty on its port (up restarts it).
#[tokio::test]
async fn redis_can_be_paused_and_restarted_when_up_owns_it() {
    let mut stack = Stack::start_with(2, None, &["--chaos"]).await;
    stack.reset("lua", 1000).await;
    let url = "/deductStock/lua?sku=lua";

    stack
        .chaos(serde_json::json!({"action": "pause_redis", "ms": 2000}))
        .await;
    let paused_at = std::time::Instant::now();
    let mut saw_503 = false;
    while paused_at.elapsed() < Duration::from_millis(1500) && !saw_503 {
        saw_503 = stack.client.get(url).await.0 == 503;
    }
    assert!(saw_503, "no 503 while Redis slept");
    let mut back = false;
    while paused_at.elapsed() < Duration::from_secs(6) && !back {
        back = stack.client.get(url).await.0 == 200;
    }
    assert!(back, "sales did not resume after the pause");

    let old = stack.redis_pid.unwrap();
    stack
        .chaos(serde_json::json!({"action": "restart_redis"}))
        .await;
    stack
        .next_line("redis: pid ", Duration::from_secs(10))
        .await
        .expect("up restarts its Redis");
    assert_ne!(stack.redis_pid, Some(old), "a new redis-server");
    // Empty now (persistence is off): reset, then it sells.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut sold = false;
    while std::time::Instant::now() < deadline && !sold {
        let reset = stack.client.reset("lua", 3, 0).await;
        sold = reset.is_ok() && stack.client.get(url).await.0 == 200;
    }
    assert!(sold, "no sale after the restart");
    stack.stop().await;
}

/// A Redis shut down again while it loads its append-only file (a second
/// restart struck before the first came back, as the soak's faults may
/// strike them) is started again by `up`: the stack lives on and sells. A
/// 30-minute soak lost its whole stack so (`up` stopped: "redis-server
/// exited before it was ready").
#[tokio::test]
async fn a_redis_shut_down_while_it_loads_is_started_again() {
    helpers::within(Duration::from_secs(120), async {
        let mut stack = Stack::start_with(2, None, &["--chaos", "--persist"]).await;
        let url = stack.redis_url.clone().expect("up's Redis");
        let client = redis::Client::open(url.as_str()).unwrap();
        // (No response timeout: filling Redis takes a while.)
        let patient = redis::AsyncConnectionConfig::new().set_response_timeout(None);
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&patient)
            .await
            .unwrap();
        // Enough data that loading it takes a while, in the AOF's base.
        let _: () = redis::cmd("DEBUG")
            .arg("POPULATE")
            .arg(1_500_000)
            .query_async(&mut conn)
            .await
            .unwrap();
        let _: () = redis::cmd("BGREWRITEAOF")
            .query_async(&mut conn)
            .await
            .unwrap();
        loop {
            let info: String = redis::cmd("INFO")
                .arg("persistence")
                .query_async(&mut conn)
                .await
                .unwrap();
            if info.contains("aof_rewrite_in_progress:0")
                && info.contains("aof_rewrite_scheduled:0")
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stack
            .chaos(serde_json::json!({"action": "restart_redis"}))
            .await;
        // Redis answers LOADING while it reads its file: shut it down then.
        loop {
            let Ok(mut fresh) = client.get_multiplexed_async_connection().await else {
                continue;
            };
            let pong: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut fresh).await;
            match pong {
                Err(err)
                    if err.kind()
                        == redis::ErrorKind::Server(redis::ServerErrorKind::BusyLoading) =>
                {
                    let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN")
                        .arg("NOSAVE")
                        .query_async(&mut fresh)
                        .await;
                    break;
                }
                Ok(_) => panic!("Redis was ready before it could be shut down while loading"),
                Err(_) => {}
            }
        }
        stack
            .next_line("redis: pid ", Duration::from_secs(60))
            .await
            .expect("up starts its Redis again, and lives on");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut sold = false;
        while std::time::Instant::now() < deadline && !sold {
            let reset = stack.client.reset("lua", 3, 0).await;
            sold = reset.is_ok() && stack.client.get("/deductStock/lua?sku=lua").await.0 == 200;
        }
        assert!(sold, "no sale after Redis came back");
        stack.stop().await;
    })
    .await;
}
