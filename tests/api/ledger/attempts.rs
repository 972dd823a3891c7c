//! Attempts that die around their write and the retries after them: a
//! crash between the write and the answer (the retry replays the sale), an
//! attempt killed mid-section (the retry waits out its claim, then sells
//! once), an attempt frozen past its claim (its late write is refused).

use super::*;

/// A process killed right after its write, before it could answer: the sale
/// is in the ledger with its request id, and the retry (on the other
/// instance) is told about that sale instead of buying again.
#[tokio::test]
async fn a_crash_between_the_write_and_the_answer_is_a_recorded_sale_the_retry_replays() {
    let mut stack = Stack::start_with(2, None, &["--chaos"]).await;
    for v in ["none", "token", "watchdog", "fenced"] {
        stack.reset(v, 5).await;
        stack.chaos(json!({"action": "crash_after_write"})).await;
        let a = stack.client.at(&stack.instances[0].url);
        let b = stack.client.at(&stack.instances[1].url);
        let (status, body) = a
            .get(&format!("/deductStock/{v}?sku={v}&request_id=w1"))
            .await;
        assert_eq!(status, 0, "{v}: instance a died before answering: {body}");
        stack
            .next_instance(Duration::from_secs(10))
            .await
            .expect("up restarts the crashed instance");
        let state = stack.state(v).await;
        assert_eq!((state.sold, state.remaining), (1, 4), "{v}: {state:?}");

        let (status, retry) = b
            .get(&format!("/deductStock/{v}?sku={v}&request_id=w1"))
            .await;
        assert_eq!(status, 200, "{v}: {retry}");
        assert_eq!(retry["replayed"], true, "{v}: {retry}");
        assert_eq!(retry["unit"], 5, "{v}: {retry}");
        let state = stack.state(v).await;
        assert_eq!(
            (state.sold, state.remaining, state.replays, state.oversold),
            (1, 4, 1, 0),
            "{v}: {state:?}"
        );
    }
    stack.stop().await;
}

/// The instance holding a request id's claim is killed (SIGKILL) in the
/// middle of its section. A retry on the other instance is told
/// `in_progress` only until the claim's deadline (`wait_ms` + `work_ms` +
/// the grace), then takes the id over and ends with exactly one sale.
#[tokio::test]
async fn a_request_id_whose_attempt_was_killed_resolves_once_within_the_bound() {
    let mut stack = Stack::start_with(2, None, &["--chaos"]).await;
    let redis_url = stack.redis_url.clone().unwrap();
    let work = Duration::from_millis(2000);
    let wait = Duration::from_millis(2000);
    for v in ["token", "watchdog"] {
        stack.reset(v, 5).await;
        let query = format!(
            "/deductStock/{v}?sku={v}&request_id=k1&work_ms={}&lease_ms=1000&wait_ms={}",
            work.as_millis(),
            wait.as_millis()
        );
        let victim = stack.instances[0].clone();
        let first =
            holder_in_section(&redis_url, v, stack.client.at(&victim.url), query.clone()).await;
        signal(victim.pid, Signal::SIGKILL);
        let killed_at = Instant::now();
        assert_eq!(first.await.unwrap().0, 0, "{v}: the victim never answered");

        let retry = resolve(
            stack.client.at(&stack.instances[1].url),
            "k1".into(),
            query.clone(),
            Duration::from_secs(15),
        )
        .await;
        let (status, body) = retry.last();
        let in_progress = retry
            .last_in_progress
            .expect("the dead attempt's claim stood for a while");
        eprintln!(
            "{v}: resolved {:?} after the kill, in_progress until {in_progress:?}: {status} {body}",
            killed_at.elapsed()
        );
        assert_eq!(*status, 200, "{v}: {body}");
        assert_ne!(
            body["replayed"], true,
            "{v}: the killed attempt sold nothing"
        );
        // in_progress only while the dead attempt's claim stood (made
        // right before the kill, for as long as an attempt may take).
        assert!(
            in_progress <= wait + work + CLAIM_GRACE + Duration::from_millis(500),
            "{v}: in_progress for {in_progress:?}"
        );
        let state = stack.state(v).await;
        assert_eq!(
            (state.sold, state.remaining, state.oversold),
            (1, 4, 0),
            "{v}: {state:?}"
        );
        stack
            .next_instance(Duration::from_secs(10))
            .await
            .expect("up restarts the killed instance");
    }
    stack.stop().await;
}

/// A frozen attempt (SIGSTOP right before its write) outlives its request
/// id's claim; a retry on the other instance takes the id over and sells.
/// When the frozen one wakes, its write finds the claim no longer its own
/// and is refused: it answers with the id's one sale, and sold is 1.
#[tokio::test]
async fn a_late_write_of_an_attempt_whose_claim_was_taken_over_cannot_also_sell() {
    let stack = Stack::start_with(2, None, &["--chaos"]).await;
    let redis_url = stack.redis_url.clone().unwrap();
    // No lock at all: only the request id's claim stands between them.
    let v = "none";
    stack.reset(v, 5).await;
    let frozen_for = CLAIM_GRACE + Duration::from_millis(1500);
    stack
        .chaos(json!({"action": "pause_holder", "ms": frozen_for.as_millis() as u64}))
        .await;
    let query = format!("/deductStock/{v}?sku={v}&request_id=late-1");
    let frozen = holder_in_section(
        &redis_url,
        v,
        stack.client.at(&stack.instances[0].url),
        query.clone(),
    )
    .await;
    let retry = resolve(
        stack.client.at(&stack.instances[1].url),
        "late-1".into(),
        query.clone(),
        Duration::from_secs(10),
    )
    .await;
    let (status, sold) = retry.last().clone();
    assert_eq!(status, 200, "{sold}");
    assert_ne!(sold["replayed"], true, "the retry made the sale: {sold}");
    assert!(
        retry
            .answers
            .iter()
            .any(|(_, b)| b["reason"] == "in_progress"),
        "the claim stood until its deadline: {:?}",
        retry.answers
    );
    let (status, late) = frozen.await.unwrap();
    assert_eq!(status, 200, "{late}");
    assert_eq!(late["replayed"], true, "the late write was refused: {late}");
    assert_eq!(late["unit"], sold["unit"]);
    let state = stack.state(v).await;
    assert_eq!(
        (
            state.sold,
            state.remaining,
            state.oversold,
            state.duplicates
        ),
        (1, 4, 0, 0),
        "{state:?}"
    );
    stack.stop().await;
}
