//! The whole stack, as users run it: `stocklock up` (redis-server, instances,
//! nginx), hammered through nginx.

use std::time::Duration;

use crate::helpers::{Stack, Tally, alive, burst};

const STOCK: i64 = 50;
const REQUESTS: usize = 400;
const CONCURRENCY: usize = 64;

/// Resets `variant`'s own SKU, fires the article's flash sale at it through
/// nginx with `work_ms=2`, and checks the books balance.
async fn flash_sale(stack: &Stack, variant: &str) -> (Tally, stocklock::wire::StateSnapshot) {
    let sku = format!("sale-{variant}");
    stack.reset(&sku, STOCK).await;
    let url = format!("{}/deductStock/{variant}?sku={sku}&work_ms=2", stack.url);
    let tally = burst(stack.http(), &url, REQUESTS, CONCURRENCY).await;
    let state = stack.state(&sku).await;
    eprintln!(
        "{variant:>12}: sold {} sold_out {} busy {} | remaining {} oversold {} duplicates {} | per instance {:?}",
        tally.count(200),
        tally.count(409),
        tally.count(429),
        state.remaining,
        state.oversold,
        state.duplicates,
        state.per_instance
    );

    // Every request got one of the three business answers, and the ledger
    // agrees with what the client was told.
    assert_eq!(tally.total(), REQUESTS, "{variant}: {:?}", tally.by_status);
    assert_eq!(
        tally.count(200) + tally.count(409) + tally.count(429),
        REQUESTS,
        "{variant}: unexpected statuses {:?}",
        tally.by_status
    );
    assert_eq!(
        state.sold,
        tally.count(200) as i64,
        "{variant}: ledger sold vs 200s"
    );
    assert_eq!(
        state.busy,
        tally.count(429) as i64,
        "{variant}: ledger busy vs 429s"
    );
    assert_eq!(state.per_instance.values().sum::<i64>(), REQUESTS as i64);
    assert_eq!(state.oversold, state.sold - (STOCK - state.remaining));
    (tally, state)
}

#[tokio::test]
async fn one_instance_makes_the_local_mutex_enough() {
    let stack = Stack::start(1, None).await;
    let (_, state) = flash_sale(&stack, "local-mutex").await;
    assert_eq!(state.oversold, 0, "{state:?}");
    assert_eq!(state.duplicates, 0, "{state:?}");
    assert_eq!(state.remaining, 0);
    assert_eq!(state.sold, STOCK);
    stack.stop().await;
}

#[tokio::test]
async fn nginx_names_the_upstream_and_keeps_admin_to_loopback_with_the_token() {
    let stack = Stack::start(2, None).await;
    let response = stack
        .http()
        .get(format!("{}/healthz", stack.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let upstream = response.headers()["x-stocklock-upstream"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        stack.instances.iter().any(|i| i.url.ends_with(&upstream)),
        "{upstream} is not one of {:?}",
        stack.instances
    );
    assert!(
        response
            .headers()
            .get("server")
            .is_none_or(|s| s == "nginx"),
        "server_tokens leaks a version"
    );

    // No token, a wrong token: 401 and nothing changes.
    let before = stack.state("lua").await;
    for auth in [
        None,
        Some("Bearer wrong"),
        Some(&*format!("Basic {}", stack.token)),
    ] {
        let mut request = stack
            .http()
            .post(format!("{}/api/admin/reset", stack.url))
            .json(&serde_json::json!({"sku": "lua", "stock": 7}));
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401, "{auth:?}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"], "unauthorized");
    }
    assert_eq!(stack.state("lua").await, before);
    // The right one works.
    assert_eq!(stack.reset("lua", 7).await.remaining, 7);
    stack.stop().await;
}

#[tokio::test]
async fn up_restarts_a_killed_instance() {
    let mut stack = Stack::start(2, None).await;
    let (name, pid) = (stack.instances[0].name.clone(), stack.instances[0].pid);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();

    let restarted = stack
        .next_instance(Duration::from_secs(5))
        .await
        .expect("the killed instance was not restarted within 5 s");
    let (new_pid, url) = (restarted.pid, restarted.url);
    assert_eq!(restarted.name, name);
    assert_ne!(new_pid, pid);
    assert!(!alive(pid));
    let health = stack.client.at(&url).health().await.unwrap();
    assert_eq!(health.pid, new_pid);
    assert_eq!(health.instance, name);

    // And nginx sends it traffic again.
    both_instances_sell(&stack).await;

    stack.stop().await;
}

/// An instance dies while `up` is held (SIGSTOP: its supervisor cannot
/// restart it yet) and another process takes its port meanwhile: `up`
/// restarts it on a new port and points nginx there, so no request (admin
/// tokens included) reaches the stranger, who records any connection.
#[tokio::test]
async fn a_restarted_instance_whose_port_was_taken_moves_and_nginx_follows() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let mut stack = Stack::start(2, None).await;
    let up = Pid::from_raw(stack.up_pid().expect("up's pid") as i32);
    let victim = stack.instances[1].clone();
    let old_port: u16 = victim.url.rsplit(':').next().unwrap().parse().unwrap();

    kill(up, Signal::SIGSTOP).unwrap();
    kill(Pid::from_raw(victim.pid as i32), Signal::SIGKILL).unwrap();
    // Its socket closes when its last thread has exited: no event of
    // that reaches us, so the bind is retried until it succeeds.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let stranger = loop {
        match std::net::TcpListener::bind(("127.0.0.1", old_port)) {
            Ok(listener) => break listener,
            Err(err) => assert!(
                std::time::Instant::now() < deadline,
                "the dead instance's port {old_port} stayed taken: {err}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    kill(up, Signal::SIGCONT).unwrap();

    let restarted = stack
        .next_instance(Duration::from_secs(20))
        .await
        .expect("the killed instance was not restarted within 20 s");
    assert_eq!(restarted.name, victim.name);
    assert_ne!(restarted.url, victim.url, "restarted on the taken port");
    let health = stack.client.at(&restarted.url).health().await.unwrap();
    assert_eq!(health.pid, restarted.pid);
    stack.instances[1] = restarted;

    both_instances_sell(&stack).await;
    stranger.set_nonblocking(true).unwrap();
    let connected = stranger.accept();
    assert!(
        connected
            .as_ref()
            .is_err_and(|err| err.kind() == std::io::ErrorKind::WouldBlock),
        "nginx sent a connection to the stranger on port {old_port}: {connected:?}"
    );
    stack.stop().await;
}

/// nginx lets `/api/admin/` through only from 127.0.0.1 and ::1. A client
/// from another address (here 127.0.0.2, still this machine) is refused
/// with a JSON 403, token or not, and a forged X-Forwarded-For does not help.
#[tokio::test]
async fn admin_is_refused_to_other_clients_even_with_a_forged_forwarded_for() {
    let stack = Stack::start_with(1, None, &["--host", "0.0.0.0"]).await;
    let port = stack.url.rsplit(':').next().unwrap().to_owned();
    let outsider = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap();
    let before = stack.state("lua").await;
    for forged in [None, Some("127.0.0.1"), Some("127.0.0.1, 127.0.0.1")] {
        let mut request = outsider
            .post(format!("http://127.0.0.1:{port}/api/admin/reset"))
            .bearer_auth(&stack.token)
            .json(&serde_json::json!({"sku": "lua", "stock": 1}));
        if let Some(forged) = forged {
            request = request
                .header("x-forwarded-for", forged)
                .header("x-real-ip", forged);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 403, "{forged:?}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"], "forbidden");
    }
    // The rest of the API is open to it.
    let response = outsider
        .get(format!("http://127.0.0.1:{port}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(stack.state("lua").await, before, "nothing changed");
    // From loopback, with the token, it works.
    assert_eq!(stack.reset("lua", 1).await.remaining, 1);
    stack.stop().await;
}

/// A port picked as free may be taken by someone else before nginx binds
/// it. nginx is ready only when the listening socket is its own: here the
/// port already answers (another listener), nginx cannot bind it, and the
/// start fails instead of passing someone else's server off as the stack.
#[tokio::test]
async fn nginx_is_not_ready_on_a_port_someone_else_listens_on() {
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = squatter.local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let upstream: std::net::SocketAddr = "127.0.0.1:9".parse().unwrap();
    let started = stocklock::up::nginx::Nginx::start(dir.path(), taken, &[upstream]).await;
    let err = match started {
        Ok(mut nginx) => {
            nginx.stop().await;
            panic!("nginx was taken for ready on a port another process listens on");
        }
        Err(err) => format!("{err:#}"),
    };
    assert!(err.contains("Address already in use"), "{err}");
}

/// 40 sales through nginx all succeed, answered by both instances.
async fn both_instances_sell(stack: &Stack) {
    stack.reset("lua", 1000).await;
    let tally = burst(
        stack.http(),
        &format!("{}/deductStock/lua?sku=lua", stack.url),
        40,
        4,
    )
    .await;
    assert_eq!(tally.count(200), 40, "{:?}", tally.by_status);
    assert_eq!(tally.by_instance.len(), 2, "{:?}", tally.by_instance);
}
