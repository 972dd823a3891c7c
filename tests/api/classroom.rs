//! Classroom mode on one stack, in a real browser: thirty students follow
//! the join link, each in a browser of their own (a browser context: no
//! cookie shared), get a seat, and step `none` into an oversell on a SKU
//! of their own, all at once; no seat reads, steps or ends another's run;
//! a seat without its cookie, or with a forged one, is nobody; a seat past
//! its rate is told to slow down; a seat runs a lesson's experiment on SKUs
//! of its own (never one that strikes the whole stack), unseen by others,
//! and its cards' Run and Reset on them, untouched by another's reset;
//! and the teacher's board shows every seat with the cell it broke.

use std::time::Duration;

use serde_json::{Value, json};

use crate::browser::Browser;
use crate::helpers::{Stack, within};

const SEATS: usize = 30;

/// Plays step mode's `none · race` with two buyers through the page's own
/// functions, as the keys would: A and B each read before either writes,
/// then both go on (two sold of a stock of two, one unit still on the
/// shelf: an oversell). The outcome lands in `window.__seat`, with each step's time.
const PLAY: &str = "window.__seat = null;
  const lane = (b) => view.lanes.find((l) => l.buyer === b);
  const release = (b) => view.releases.find((c) => c.Release && c.Release.buyer === b);
  const timed = async (choice) => { const t0 = performance.now(); const next = await send({take: choice});
    window.__took.push(performance.now() - t0); if (!next && !view.over) throw new Error(document.getElementById('message').textContent); };
  window.__took = [];
  document.getElementById('buyers').value = '2';
  (async () => {
    await start();
    if (!view) throw new Error(document.getElementById('message').textContent);
    for (const b of ['A', 'B']) {
      while (!(lane(b).state === 'waiting' && lane(b).gate === 'before_write')) await timed(release(b));
    }
    while (!view.over) await timed(view.releases[0]);
    window.__seat = {run: view.id, sku: view.sku, over: view.over, violation: view.verdict.violation, took: window.__took};
  })().catch((e) => { window.__seat = {failed: String(e && e.stack || e), message: document.getElementById('message').textContent, view: view && {over: view.over, steps: view.steps.length}}; });
  return true;";

/// What a seat's fetch of `path` with `body` (POST) answers: its status.
const FETCH: &str = "const [method, path, body, done] = arguments;
  fetch(path, {method, headers: {'Content-Type': 'application/json'}, body: body === null ? undefined : JSON.stringify(body)})
    .then((r) => done(r.status), (e) => done(String(e)));";

async fn fetch_status(browser: &Browser, method: &str, path: &str, body: Value) -> Value {
    browser.run_async(FETCH, json!([method, path, body])).await
}

/// The teacher's board, as `GET /api/admin/classroom` answers it.
async fn read_board(http: &reqwest::Client, stack: &Stack) -> Value {
    http.get(format!("{}/api/admin/classroom", stack.url))
        .bearer_auth(&stack.token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn thirty_seats_each_step_none_into_an_oversell_of_their_own_and_none_touches_anothers() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let stack = Stack::start_with(2, None, &["--classroom"]).await;
    let http = reqwest::Client::new();
    // Nobody without a seat or the token; a forged seat is nobody either.
    let start = json!({"variant": "none", "scenario": "race"});
    for cookie in [None, Some("stocklock_seat=abc.00")] {
        let mut request = http.post(format!("{}/api/step", stack.url)).json(&start);
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        assert_eq!(request.send().await.unwrap().status(), 401, "{cookie:?}");
    }

    // The teacher's page: the classroom open (`up --classroom`), the join
    // link and its QR code.
    browser
        .goto(&format!("{}/classroom#token={}", stack.url, stack.token))
        .await;
    browser
        .wait_until("document.getElementById('classroom').dataset.open === 'true'")
        .await;
    let join = browser
        .run("return [document.getElementById('join-url').textContent, document.querySelectorAll('.qr svg').length]")
        .await;
    assert_eq!(join, json!([format!("{}/join", stack.url), 1]));
    let teacher = browser.window().await;

    within(Duration::from_secs(600), async {
        let mut seats = Vec::new();
        for i in 0..SEATS {
            seats.push(browser.open_apart(&format!("{}/join?name=student {i}", stack.url)).await);
        }
        // Each seat lands on step mode as itself, and starts playing.
        for (i, handle) in seats.iter().enumerate() {
            browser.switch_to(handle).await;
            browser
                .wait_until("document.querySelectorAll('#cell option').length > 20")
                .await;
            let seat = browser
                .run("return [document.getElementById('step').dataset.seat, document.getElementById('cell').value, document.getElementById('anyway') === null]")
                .await;
            assert_eq!(seat, json!([format!("student {i}"), "none/race", true]));
            browser.run(PLAY).await;
        }
        let mut runs = Vec::new();
        let mut took = Vec::new();
        for (i, handle) in seats.iter().enumerate() {
            browser.switch_to(handle).await;
            browser.wait_until("window.__seat !== null").await;
            let seat = browser.run("return window.__seat").await;
            assert!(seat["failed"].is_null(), "student {i}: {seat}");
            assert_eq!((&seat["over"], &seat["violation"]), (&json!(true), &json!(true)), "student {i}: {seat}");
            let sku = seat["sku"].as_str().unwrap().to_owned();
            let state = stack.state(&sku).await;
            assert!(state.oversold > 0, "student {i}'s own SKU oversold: {state:?}");
            took.extend(seat["took"].as_array().unwrap().iter().filter_map(Value::as_f64));
            runs.push((seat["run"].as_str().unwrap().to_owned(), sku));
        }
        let skus: std::collections::BTreeSet<_> = runs.iter().map(|(_, sku)| sku).collect();
        assert_eq!(skus.len(), SEATS, "a SKU of each seat's own");
        took.sort_by(f64::total_cmp);
        let at = |q: f64| took[((took.len() - 1) as f64 * q) as usize];
        crate::helpers::note(&format!(
            "classroom: {SEATS} seats at once, {} steps: p50 {:.0} ms, p95 {:.0} ms, max {:.0} ms",
            took.len(),
            at(0.5),
            at(0.95),
            at(1.0)
        ));

        // Student 0 starts a new run; student 1 can neither read, step nor
        // end it, and it goes on untouched.
        browser.switch_to(&seats[0]).await;
        browser.run("start(); return true").await;
        browser
            .wait_until(&format!(
                "view && view.id !== '{}' && !view.over && view.lanes.length === 2",
                runs[0].0
            ))
            .await;
        let mine = browser.run("return [view.id, view.version]").await;
        let run = mine[0].as_str().unwrap().to_owned();
        browser.switch_to(&seats[1]).await;
        let path = format!("/api/step/{run}");
        for (method, body) in [("GET", Value::Null), ("POST", json!("end")), ("POST", json!({"take": {"Release": {"buyer": "A", "gate": "before_acquire"}}}))] {
            let status = fetch_status(&browser, method, &path, body.clone()).await;
            assert_eq!(status, json!(403), "student 1 {method} {path} {body}");
        }
        // The stack's own reset is the teacher's alone.
        let status = fetch_status(&browser, "POST", "/api/admin/reset", json!({"sku": runs[0].1, "stock": 2})).await;
        assert_eq!(status, json!(401), "a seat reset another's SKU");
        browser.switch_to(&seats[0]).await;
        let still = browser.run("return fetch(location.origin + '/api/step/' + view.id).then((r) => r.json()).then((v) => [v.over, v.version]); ").await;
        assert_eq!(still, json!([false, mine[1]]), "student 0's run was touched");

        // Past its rate, a seat is told to slow down (429), not let in.
        let mut refused = None;
        for sent in 1..=100 {
            let status = fetch_status(&browser, "GET", &path, Value::Null).await;
            if status == json!(429) {
                refused = Some(sent);
                break;
            }
            assert_eq!(status, json!(200), "request {sent}");
        }
        assert!(refused.is_some(), "100 requests in a row, none refused");

        // The lessons as a seat: a step that touches nothing but its SKU runs
        // on the seat's own SKU, one at a time; a step that strikes the
        // whole stack is the teacher's; nobody else sees the result.
        let teachers_before = stack.state("local-mutex").await;
        browser.switch_to(&seats[2]).await;
        browser.goto(&format!("{}/lessons", stack.url)).await;
        browser
            .wait_until("document.querySelectorAll('section.step').length > 0")
            .await;
        let prefix = browser.run("return document.body.dataset.skuPrefix").await;
        let prefix = prefix.as_str().unwrap().to_owned();
        assert!(prefix.starts_with("seat-"), "{prefix}");
        let pause = browser
            .run("return document.querySelector('[data-step=pause] [data-action=run]').disabled")
            .await;
        assert_eq!(pause, json!(true), "a seat's button for a stack-wide fault");
        let status = fetch_status(&browser, "POST", "/api/lessons/pause", json!({})).await;
        assert_eq!(status, json!(403), "a seat ran a stack-wide fault");
        browser.click("[data-step=two-instances] [data-action=run]").await;
        browser
            .wait_until("document.querySelector('[data-step=two-instances]').dataset.state === 'running'")
            .await;
        let status = fetch_status(&browser, "POST", "/api/lessons/lua", json!({})).await;
        assert_eq!(status, json!(409), "a seat's second experiment at once");
        browser
            .wait_until("['done', 'failed'].includes(document.querySelector('[data-step=two-instances]').dataset.state)")
            .await;
        let shown = browser
            .run("const s = document.querySelector('[data-step=two-instances]'); return [s.dataset.state, s.querySelector('[data-field=verdict]').dataset.observed, s.querySelector('[data-field=oversold]').textContent]")
            .await;
        let own = stack.state(&format!("{prefix}local-mutex")).await;
        assert!(own.oversold > 0, "the seat's own SKU: {own:?}");
        assert_eq!(shown, json!(["done", "oversells", own.oversold.to_string()]));
        assert_eq!(stack.state("local-mutex").await, teachers_before, "the teacher's SKU was touched");
        // Neither another seat nor the teacher sees it.
        browser.switch_to(&seats[3]).await;
        let theirs = browser
            .run_async("fetch('/api/lessons').then((r) => r.json()).then(arguments[0])", json!([]))
            .await;
        assert_eq!(theirs, json!({"steps": {}}), "seat 3 sees seat 2's");
        let teachers: Value = http.get(format!("{}/api/lessons", stack.url)).send().await.unwrap().json().await.unwrap();
        assert!(teachers["steps"].get("two-instances").is_none(), "{teachers}");

        // The dashboard as a seat: its cards are its own SKUs; their Run
        // races them, their Reset starts them over; another seat's reset
        // and the teacher's SKU are untouched, and the stack's faults and
        // a card's scenarios are not offered.
        let teachers_none = stack.state("none").await;
        browser.switch_to(&seats[4]).await;
        browser.goto(&stack.url).await;
        browser
            .wait_until("document.querySelector('#live').dataset.live === 'true'")
            .await;
        let prefix = browser.run("return document.body.dataset.skuPrefix").await;
        let own = format!("{}none", prefix.as_str().unwrap());
        let offered = browser
            .run("return [document.querySelector('.chaos').hidden, document.querySelector('[data-variant=none] [data-action=scenarios]').hidden]")
            .await;
        assert_eq!(offered, json!([true, true]), "a seat is offered the stack's faults");
        browser
            .run("document.querySelector('#load-form').elements.requests.value = '100'; return true")
            .await;
        browser.click("[data-variant=none] [data-action=run]").await;
        browser
            .wait_until("document.querySelector('#run').dataset.runState === 'done'")
            .await;
        let state = stack.state(&own).await;
        assert!(state.oversold > 0, "the seat's own none: {state:?}");
        browser
            .wait_until(&format!(
                "document.querySelector('[data-variant=none] [data-field=oversold]').textContent === '{}'",
                state.oversold
            ))
            .await;
        // Another seat's reset is its own.
        browser.switch_to(&seats[5]).await;
        let status = fetch_status(&browser, "POST", "/api/seat/reset", json!({"variant": "none", "stock": 3})).await;
        assert_eq!(status, json!(200));
        assert_eq!(stack.state(&own).await, state, "seat 5's reset touched seat 4's SKU");
        // The seat's own Reset.
        browser.switch_to(&seats[4]).await;
        browser.click("[data-variant=none] [data-action=reset]").await;
        browser
            .wait_until("document.querySelector('[data-variant=none] [data-field=oversold]').textContent === '0'")
            .await;
        let reset = stack.state(&own).await;
        assert_eq!((reset.sold, reset.remaining), (0, reset.initial), "{reset:?}");
        assert_eq!(stack.state("none").await, teachers_none, "the teacher's SKU was touched");
        // The seats' routes are not the teacher's.
        let answer = http
            .post(format!("{}/api/seat/reset", stack.url))
            .bearer_auth(&stack.token)
            .json(&json!({"variant": "none", "stock": 3}))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 403);

        // The teacher's board: every seat, each with the cell it broke.
        browser.switch_to(&teacher).await;
        browser
            .wait_until(&format!("document.querySelectorAll('#seats tr[data-seat]').length === {SEATS}"))
            .await;
        let board = read_board(&http, &stack).await;
        let seats_shown = board["seats"].as_array().unwrap();
        assert_eq!(seats_shown.len(), SEATS, "{board}");
        for seat in seats_shown {
            assert_eq!(seat["solved"], json!(["none/race"]), "{seat}");
        }
        browser.screenshot("classroom.png").await;

        // An idle seat expires: its hash lives two hours past its last
        // request (here, its time is up at once). It is nobody then, and
        // the board no longer lists it.
        let last = seats_shown[SEATS - 1]["id"].as_str().unwrap().to_owned();
        let redis_url = stack.redis_url.clone().expect("up's own Redis");
        let mut redis = crate::helpers::redis_conn(&redis_url).await;
        let key = format!("{{stocklock:class}}:seat:{last}");
        let ttl: i64 = redis::cmd("PTTL").arg(&key).query_async(&mut redis).await.unwrap();
        let idle = stocklock::classroom::SEAT_IDLE.as_millis() as i64;
        assert!(ttl > idle - 600_000 && ttl <= idle, "a seat's time left: {ttl} ms");
        let _: () = redis::cmd("PEXPIRE").arg(&key).arg(1).query_async(&mut redis).await.unwrap();
        browser.switch_to(&seats[SEATS - 1]).await;
        let status = fetch_status(&browser, "POST", "/api/step", json!({"variant": "none", "scenario": "race"})).await;
        assert_eq!(status, json!(401), "an expired seat started a run");
        let board = read_board(&http, &stack).await;
        assert_eq!(board["seats"].as_array().unwrap().len(), SEATS - 1, "{board}");
    })
    .await;
    browser.quit().await;
    stack.stop().await;
}
