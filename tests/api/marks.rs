//! Sold-out marks: an instance that heard Redis say a SKU is sold out
//! answers its next buyers itself. A mark may only refuse, never sell; a
//! reset clears it on every instance when its announcement arrives, a lost
//! announcement heals within the mark's TTL, a lost subscription clears all
//! marks, and the books still balance when read. A TTL of 0 turns marks off.

use std::time::{Duration, Instant};

use serde_json::Value;
use stocklock::chaos::Chaos;
use stocklock::client::StackClient;
use stocklock::store::{Keys, Store};

use crate::helpers::{self, InProcess, Stack};

/// Asks `client` to buy `sku` with `lua` until `done` says so, `bound`
/// requests at most, `pace` apart; every answer, in order.
async fn buy_until(
    client: &StackClient,
    sku: &str,
    (bound, pace): (usize, Duration),
    done: impl Fn(u16, &Value) -> bool,
) -> Vec<(u16, Value)> {
    let mut answers = Vec::new();
    for _ in 0..bound {
        tokio::time::sleep(pace).await;
        let (status, body) = client.get(&format!("/deductStock/lua?sku={sku}")).await;
        let stop = done(status, &body);
        answers.push((status, body));
        if stop {
            return answers;
        }
    }
    panic!("{sku}: not done within {bound} requests: {answers:?}");
}

fn from_mark(body: &Value) -> bool {
    body["from_mark"] == Value::Bool(true)
}

/// Sells `sku`'s one unit, then asks each instance until it answers from
/// its mark: every instance has a mark of the SKU afterwards. The answers
/// made, for the books.
async fn mark_everywhere(stack: &Stack, sku: &str) -> usize {
    stack.reset(sku, 1).await;
    let (status, body) = stack
        .client
        .get(&format!("/deductStock/lua?sku={sku}"))
        .await;
    assert_eq!(status, 200, "{body}");
    let mut answers = 1;
    for instance in &stack.instances {
        let at = stack.client.at(&instance.url);
        let seen = buy_until(&at, sku, (5, Duration::ZERO), |_, body| from_mark(body)).await;
        // The first sold-out answer came from Redis, the mark from it.
        assert!(!from_mark(&seen[0].1), "{seen:?}");
        assert!(seen.iter().all(|(status, _)| *status == 409), "{seen:?}");
        answers += seen.len();
    }
    answers
}

/// With marks living a minute, only the reset's announcement can clear
/// them: every instance sells again right after the reset, and a lost
/// subscription (its connection killed) clears them too.
#[tokio::test]
async fn a_reset_clears_every_instances_mark_and_the_books_still_balance() {
    let stack = Stack::start_with(2, None, &["--sold-out-mark-ttl", "60s"]).await;
    let sku = "mark1";
    let mut answers = mark_everywhere(&stack, sku).await;
    // The marks' answers reached no Redis, yet the state counts them all.
    let state = stack.state(sku).await;
    assert_eq!(
        state.per_instance.values().sum::<i64>(),
        answers as i64,
        "{state:?}"
    );
    assert_eq!((state.sold, state.oversold), (1, 0), "{state:?}");

    let started = Instant::now();
    stack.reset(sku, 10).await;
    // The reset starts the books over.
    answers = 0;
    for instance in &stack.instances {
        let at = stack.client.at(&instance.url);
        // The announcement is on its way when the reset returns: a buyer
        // may still meet the old mark (refused, nothing sold), never more.
        let seen = buy_until(&at, sku, (200, Duration::ZERO), |status, _| status == 200).await;
        assert!(
            seen[..seen.len() - 1]
                .iter()
                .all(|(status, body)| *status == 409 && from_mark(body)),
            "{seen:?}"
        );
        answers += seen.len();
    }
    eprintln!(
        "both instances sold again {:?} after the reset (marks live 60 s)",
        started.elapsed()
    );
    let state = stack.state(sku).await;
    assert_eq!((state.sold, state.remaining), (2, 8), "{state:?}");
    assert_eq!(
        state.per_instance.values().sum::<i64>(),
        answers as i64,
        "{state:?}"
    );

    // Marks again; then every pub/sub connection is killed: the instances
    // may have missed a reset, so they forget every mark.
    mark_everywhere(&stack, sku).await;
    let redis = redis::Client::open(stack.redis_url.clone().unwrap()).unwrap();
    let mut conn = redis.get_multiplexed_async_connection().await.unwrap();
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(killed >= 2, "each instance's listener: {killed}");
    for instance in &stack.instances {
        let at = stack.client.at(&instance.url);
        let seen = buy_until(&at, sku, (200, Duration::ZERO), |_, body| !from_mark(body)).await;
        assert!(seen.iter().all(|(status, _)| *status == 409), "{seen:?}");
    }
    stack.stop().await;
}

/// A reset nobody announced (its announcement lost): the mark refuses
/// buyers of the new stock until its TTL is over, sells nothing meanwhile,
/// and then the instance asks Redis again and sells.
#[tokio::test]
async fn a_lost_announcement_heals_within_the_ttl_and_a_mark_never_sells() {
    let stack = Stack::start_with(2, None, &["--sold-out-mark-ttl", "3s"]).await;
    let sku = "mark2";
    mark_everywhere(&stack, sku).await;
    // The same reset `POST /api/admin/reset` makes, but unannounced.
    let store = Store::open(stack.redis_url.as_deref().unwrap()).unwrap();
    let keys = Keys::new(&stocklock::knobs::Sku::parse(sku).unwrap());
    let reset = stocklock::ledger::reset_sku_unannounced(
        &mut store.conn().await.unwrap(),
        &keys,
        5,
        0,
        false,
    )
    .await
    .unwrap();
    assert!(reset);
    let restocked = Instant::now();
    // Both marks are younger than their 3 s: each refuses at first.
    for instance in &stack.instances {
        let (status, body) = stack
            .client
            .at(&instance.url)
            .get(&format!("/deductStock/lua?sku={sku}"))
            .await;
        assert_eq!((status, from_mark(&body)), (409, true), "{body}");
    }
    for instance in &stack.instances {
        let at = stack.client.at(&instance.url);
        let pace = Duration::from_millis(20);
        let seen = buy_until(&at, sku, (500, pace), |status, _| status == 200).await;
        let refused = &seen[..seen.len() - 1];
        assert!(
            refused
                .iter()
                .all(|(status, body)| *status == 409 && from_mark(body)),
            "a stale mark only refuses: {refused:?}"
        );
        eprintln!(
            "instance {}: {} buyers refused by the stale mark, then sold {:?} after the unannounced reset (TTL 3 s)",
            instance.name,
            refused.len(),
            restocked.elapsed()
        );
    }
    let state = stack.state(sku).await;
    assert_eq!(
        (state.sold, state.remaining, state.oversold),
        (2, 3, 0),
        "{state:?}"
    );
    stack.stop().await;
}

/// The lock variants keep teaching the lock: every buyer takes it unless
/// the request asks for the mark; `lua` can be told not to use it; a
/// request id's answer always comes from Redis (it is recorded for
/// retries).
#[tokio::test]
async fn marks_are_opt_in_for_lock_variants_and_never_answer_a_request_id() {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let instance = InProcess::start(&store, "t", Chaos::off()).await;
    let ask = |uri: String| {
        let instance = instance.clone();
        async move {
            let (status, body) = instance.get(&uri).await;
            assert_eq!(status, 409, "{uri}: {body}");
            from_mark(&body)
        }
    };
    for (variant, sku) in [("watchdog", "opt1"), ("lua", "opt2")] {
        let scripted = variant == "lua";
        instance.reset(sku, 0, 0).await;
        let off = [
            ask(format!("/deductStock/{variant}?sku={sku}&sold_out_mark=0")).await,
            ask(format!("/deductStock/{variant}?sku={sku}&sold_out_mark=0")).await,
        ];
        assert_eq!(off, [false, false], "{variant}: asked not to");
        let by_default = [
            ask(format!("/deductStock/{variant}?sku={sku}")).await,
            ask(format!("/deductStock/{variant}?sku={sku}")).await,
        ];
        assert_eq!(by_default, [false, scripted], "{variant}: by default");
        // lua's mark is there already; the lock variant's is set now.
        let on = [
            ask(format!("/deductStock/{variant}?sku={sku}&sold_out_mark=1")).await,
            ask(format!("/deductStock/{variant}?sku={sku}&sold_out_mark=1")).await,
        ];
        assert_eq!(on, [scripted, true], "{variant}: asked to");
        for n in 0..2 {
            let id = format!("{variant}-id-{n}");
            let uri = format!("/deductStock/{variant}?sku={sku}&sold_out_mark=1&request_id={id}");
            assert!(!ask(uri).await, "{variant}: a request id asks Redis");
        }
    }
    // Every answer counted, the marks' ones too.
    let state = instance.state("opt2").await;
    assert_eq!(state.per_instance.get("t"), Some(&8), "{state:?}");
}

/// `--sold-out-mark-ttl 0` turns marks off, as `--help` and the README
/// say: `serve` and `up` both take it through the real command line, and a
/// stack's instance started so asks Redis for every buyer.
#[tokio::test]
async fn a_zero_mark_ttl_is_taken_and_no_answer_comes_from_a_mark() {
    use clap::Parser;
    use stocklock::cli::{Cli, Command};
    for line in [
        ["stocklock", "serve", "--sold-out-mark-ttl", "0"],
        ["stocklock", "up", "--sold-out-mark-ttl", "0ms"],
    ] {
        let cli = Cli::try_parse_from(line).unwrap_or_else(|err| panic!("{line:?}: {err}"));
        let ttl = match cli.command {
            Command::Serve(args) => args.sold_out_mark_ttl,
            Command::Up(config) => config.sold_out_mark_ttl,
            other => panic!("{line:?} parsed as {other:?}"),
        };
        assert_eq!(ttl, Duration::ZERO, "{line:?}");
    }
    // `up` hands the TTL on to its instances' own command lines.
    let stack = Stack::start_with(1, None, &["--sold-out-mark-ttl", "0"]).await;
    let sku = "mark0";
    stack.reset(sku, 1).await;
    let mut answers = Vec::new();
    for _ in 0..10 {
        answers.push(
            stack
                .client
                .get(&format!("/deductStock/lua?sku={sku}"))
                .await,
        );
    }
    assert_eq!(answers[0].0, 200, "{answers:?}");
    assert!(
        answers[1..]
            .iter()
            .all(|(status, body)| *status == 409 && !from_mark(body)),
        "marks are off: every refusal comes from Redis: {answers:?}"
    );
    stack.stop().await;
}

/// Units an expired reservation gave back are announced like a reset:
/// with marks living a minute, every instance sells them again within the
/// announcement, not the TTL. Every buyer a mark refused is counted in the
/// SKU's state.
#[tokio::test]
async fn a_give_back_clears_every_instances_mark_and_refusals_are_counted() {
    let stack = Stack::start_with(2, None, &["--sold-out-mark-ttl", "60s"]).await;
    let sku = "mark3";
    stack.reset(sku, 2).await;
    for _ in 0..2 {
        let (status, body) = stack
            .client
            .get(&format!("/deductStock/lua?sku={sku}"))
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let mut refused_by_marks = 0;
    for instance in &stack.instances {
        let at = stack.client.at(&instance.url);
        let seen = buy_until(&at, sku, (5, Duration::ZERO), |_, body| from_mark(body)).await;
        refused_by_marks += seen.iter().filter(|(_, body)| from_mark(body)).count();
    }

    // Both reservations expire: the expiry pass's give-back, as it runs it.
    let store = Store::open(stack.redis_url.as_deref().unwrap()).unwrap();
    let mut conn = store.conn().await.unwrap();
    let keys = Keys::new(&stocklock::knobs::Sku::parse(sku).unwrap());
    let epoch = crate::helpers::epoch(&mut conn, &keys).await;
    for (sale, unit) in [(1, 2), (2, 1)] {
        let given = stocklock::orders::expiry::give_back(&mut conn, &keys, epoch, sale, unit)
            .await
            .unwrap();
        assert_eq!(given, stocklock::orders::expiry::GiveBack::Returned);
    }
    let given_back = Instant::now();
    for instance in &stack.instances {
        let at = stack.client.at(&instance.url);
        // The announcement is on its way when the give-back returns: a
        // buyer may still meet the old mark (refused, nothing sold).
        let seen = buy_until(&at, sku, (200, Duration::ZERO), |status, _| status == 200).await;
        let refused = &seen[..seen.len() - 1];
        assert!(
            refused
                .iter()
                .all(|(status, body)| *status == 409 && from_mark(body)),
            "{refused:?}"
        );
        refused_by_marks += refused.len();
    }
    eprintln!(
        "both instances sold the given-back units {:?} after the give-back (marks live 60 s)",
        given_back.elapsed()
    );
    let state = stack.state(sku).await;
    assert_eq!(
        (state.sold, state.returned, state.remaining, state.oversold),
        (4, 2, 0, 0),
        "{state:?}"
    );
    assert_eq!(
        state.mark_refusals, refused_by_marks as i64,
        "every buyer a mark refused is counted: {state:?}"
    );
    stack.stop().await;
}

/// The dashboard's card shows how many buyers marks refused, as the
/// ledger counts them.
#[tokio::test]
async fn the_card_shows_the_buyers_marks_refused() {
    let Some(browser) = crate::browser::Browser::start().await else {
        return;
    };
    let stack = Stack::start(1, None).await;
    browser
        .goto(&format!("{}/#token={}", stack.url, stack.token))
        .await;
    browser
        .wait_until("document.querySelector('#live').dataset.live === 'true'")
        .await;
    stack.reset("lua", 0).await;
    // The first sold-out answer comes from Redis, the next three from the mark.
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(stack.client.get("/deductStock/lua?sku=lua").await);
    }
    let refused = seen.iter().filter(|(_, body)| from_mark(body)).count();
    assert_eq!(refused, 3, "{seen:?}");
    let state = stack.state("lua").await;
    assert_eq!(state.mark_refusals, 3, "{state:?}");
    browser
        .wait_until(
            "document.querySelector('[data-variant=lua] [data-field=mark_refusals]').textContent.startsWith('3 ')",
        )
        .await;
    browser.quit().await;
    stack.stop().await;
}
