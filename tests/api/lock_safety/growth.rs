//! No client can grow Redis or an instance without bound: SKUs never
//! stocked write nothing, request ids are forgotten after --request-ttl.

use super::*;

/// Resident memory of a process, from /proc (kB).
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Keys in the stack's Redis.
async fn dbsize(redis_url: &str) -> i64 {
    redis::cmd("DBSIZE")
        .query_async(&mut redis_conn(redis_url).await)
        .await
        .unwrap()
}

/// 100 000 requests: 60 000 to distinct SKUs nobody stocked, over every
/// kind of variant, leave Redis's key count as it was (a 404 each, nothing
/// written); 40 000 with distinct request ids on one stocked SKU, at up to
/// 5 000 a second with ids remembered for 1 s, leave about 1 s worth of ids,
/// not 40 000, and keep the idempotency promise for that second; and the
/// instances stay under 30 MB.
#[tokio::test]
async fn no_client_can_grow_redis_or_an_instance_without_bound() {
    use stocklock::load::engine::{self, Plan, Progress};

    let stack = Stack::start_with(2, None, &["--no-chaos", "--request-ttl", "1s"]).await;
    let redis_url = stack.redis_url.clone().unwrap();
    let target = stocklock::load::resolve_target(&stack.url).await.unwrap();
    let plan = |paths: Vec<String>, rate: Option<f64>| Plan {
        method: hyper::Method::GET,
        requests: Some(paths.len() as u64),
        paths,
        concurrency: 64,
        duration: None,
        rate,
        timeout: Duration::from_secs(30),
        history: None,
    };

    // Distinct SKUs nobody stocked.
    let before = dbsize(&redis_url).await;
    let variants = [
        "token",
        "watchdog",
        "fenced",
        "redlock",
        "setnx",
        "local-mutex",
        "lua",
    ];
    let ghosts: Vec<String> = (0..60_000)
        .map(|i| {
            format!(
                "/deductStock/{}?sku=ghost-{i}",
                variants[i % variants.len()]
            )
        })
        .collect();
    let tally = engine::run(&target, &plan(ghosts, None), &Progress::default()).await;
    eprintln!(
        "60 000 unknown SKUs: {:.0} req/s, errors {:?}",
        tally.rps(),
        tally.errors
    );
    // Every answer a 404 (counted with the other non-business statuses).
    assert_eq!(tally.errors.other, 60_000, "{:?}", tally.errors);
    assert_eq!(
        dbsize(&redis_url).await,
        before,
        "unknown SKUs left keys behind"
    );

    // Distinct request ids on one stocked SKU, remembered for 1 s.
    stack.reset("ids", 1_000_000).await;
    let ids: Vec<String> = (0..40_000)
        .map(|i| {
            let v = if i % 2 == 0 { "watchdog" } else { "lua" };
            format!("/deductStock/{v}?sku=ids&request_id=id-{i}")
        })
        .collect();
    let load = tokio::spawn({
        let (target, plan) = (target.clone(), plan(ids, Some(5_000.0)));
        async move { engine::run(&target, &plan, &Progress::default()).await }
    });
    let mut most = 0;
    let mut sampler = redis_conn(&redis_url).await;
    while !load.is_finished() {
        let remembered: i64 = redis::cmd("HLEN")
            .arg("requests:{ids}")
            .query_async(&mut sampler)
            .await
            .unwrap();
        most = most.max(remembered);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let tally = load.await.unwrap();
    let state = stack.state("ids").await;
    eprintln!(
        "40 000 request ids at {:.0}/s: {} sold, at most {most} ids remembered at once",
        tally.rps(),
        state.sold
    );
    assert_eq!(tally.sold, 40_000, "{:?}", tally.errors);
    assert_eq!(state.sold, 40_000);
    // At most 1 s of ids at 5 000/s, with the sweep's lag: far below 40 000.
    assert!(most < 12_000, "{most} ids remembered at once");

    // The promise itself: a retry within the time to live is answered from
    // the record; one after it is a new request.
    let buy = |id: &str| {
        let path = format!("/deductStock/lua?sku=ids&request_id={id}");
        let client = stack.client.clone();
        async move { client.get(&path).await.1 }
    };
    let first = buy("probe").await;
    let again = buy("probe").await;
    assert_eq!(
        (&again["replayed"], &again["unit"]),
        (&json!(true), &first["unit"])
    );
    // Time has to pass for a time to live to run out: no event says it did.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    // Each new id forgets up to 32 expired ones, oldest first: enough new
    // ids to reach the probe, which came after every id of the run.
    let remembered: usize = redis::cmd("HLEN")
        .arg("requests:{ids}")
        .query_async(&mut sampler)
        .await
        .unwrap();
    for i in 0..remembered / 32 + 2 {
        buy(&format!("sweeper-{i}")).await;
    }
    let later = buy("probe").await;
    assert_ne!(later["replayed"], json!(true), "{later}");
    assert_ne!(later["unit"], first["unit"], "a new sale: {later}");

    for instance in &stack.instances {
        let kb = rss_kb(instance.pid);
        eprintln!("instance {}: {} kB resident", instance.name, kb);
        // About 20 MiB: the runtime, the connections, and up to a second
        // of the SKU's critical sections waiting for the timeline (at most
        // timeline::HELD of them, under a MiB). 40 000 requests each
        // leaving 250 bytes behind would be 10 MiB more.
        assert!(kb < 40 * 1024, "instance {} uses {kb} kB", instance.name);
    }
    stack.stop().await;
}
