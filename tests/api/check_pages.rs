//! The checker's verdicts on the pages, in a real browser: a lesson step
//! shows its cell's verdict and draws its shortest counterexample (or says
//! that none exists within the bounds); a card's scenarios show each cell's
//! model verdict beside the live one and open the model's trace.
//!
//! One instance on a real Redis serves the pages on a socket of its own:
//! nothing here runs an experiment, so no stack is needed.

use std::future::IntoFuture;

use serde_json::json;
use stocklock::check::{self, draw};
use stocklock::http::{AppState, app};
use stocklock::lock::Wakeups;
use stocklock::store::Store;
use stocklock::up::redis::RedisServer;
use stocklock::variants::{Scenario, Variant};

use crate::browser::Browser;
use crate::helpers::{self, in_process_config};

/// An instance with its board reader running, listening on a free port:
/// its URL, and what must live as long as the test.
async fn serve() -> (String, RedisServer, Store, Vec<tokio::task::JoinHandle<()>>) {
    let redis = helpers::redis().await;
    let store = Store::open(&redis.url()).unwrap();
    let state = AppState::new(store.clone(), in_process_config("a"), Wakeups::new());
    let mut tasks = state.start_background();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tasks.push(tokio::spawn(async move {
        let _ = axum::serve(listener, app(state)).into_future().await;
    }));
    (url, redis, store, tasks)
}

/// What a checker block (`data-field=model` of a step, or a card's
/// opened model view) shows.
const SHOWN: &str = "const el = document.querySelector(arguments[0]);
     const drawing = el.querySelector('.check-timeline');
     return {state: el.dataset.state, model: el.dataset.model, steps: el.dataset.steps,
       states: el.dataset.states, line: el.querySelector('.check-line').textContent,
       bounds: el.querySelector('.check-bounds').textContent,
       list: [...el.querySelectorAll('.check-steps li')].map((li) => li.textContent),
       verdict: el.querySelector('.check-verdict').textContent,
       lines: [...el.querySelectorAll('.check-line')].map((p) => p.textContent),
       drawn: drawing ? drawing.dataset.drawn : null,
       sections: drawing ? drawing.dataset.sections : null};";

/// What the checker's block at `at` shows, once its trace is drawn.
async fn shown_drawn(browser: &Browser, at: &str) -> serde_json::Value {
    browser
        .wait_until(&format!(
            "document.querySelector('{at} .check-timeline').dataset.drawn === 'true'"
        ))
        .await;
    browser.run_with(SHOWN, json!([at])).await
}

/// Steps as the page lists them, in English or (`zh`) in the server's
/// Chinese: the model's clock named where it moves (every step said
/// "tick 0" before, over an axis in ms).
fn listed(steps: &[check::Step], zh: bool) -> Vec<String> {
    let mut clock = None;
    steps
        .iter()
        .map(|s| {
            let moved = clock != Some(s.at);
            clock = Some(s.at);
            let text = if zh { &s.text_zh } else { &s.text };
            match (moved, zh) {
                (true, false) => format!("tick {} · {text}", s.at),
                (true, true) => format!("第 {} 拍 · {text}", s.at),
                (false, _) => text.clone(),
            }
        })
        .collect()
}

/// The checker's block at `at` shows `verdict` in Chinese: its steps, the
/// model's and the claim's words, and the property it breaks or rests on,
/// as the server says them; and no English word of the checker's in it.
async fn shows_in_chinese(browser: &Browser, at: &str, verdict: &check::Verdict) {
    let schedule = match verdict.broken {
        Some(_) => &verdict.trace,
        None => &verdict.witness,
    };
    let list = json!(listed(schedule, true));
    browser
        .wait_until(&format!(
            "JSON.stringify([...document.querySelectorAll('{at} .check-steps li')].map((li) => li.textContent)) === {}",
            serde_json::to_string(&list.to_string()).unwrap()
        ))
        .await;
    let shown = browser.run_with(SHOWN, json!([at])).await;
    assert_eq!(shown["list"], list, "{shown}");
    let said = shown["verdict"].as_str().unwrap();
    assert!(
        said.starts_with(&format!(
            "模型:{} · 预期:{}",
            verdict.model_zh, verdict.claim_zh
        )),
        "{shown}"
    );
    match (verdict.broken_zh, verdict.witnessed_zh) {
        (Some(broken), _) => assert!(said.contains(&format!("“{broken}”")), "{shown}"),
        (None, Some(witnessed)) => assert!(
            shown["lines"]
                .to_string()
                .contains(&format!("“{witnessed}”")),
            "{shown}"
        ),
        (None, None) => panic!("no schedule: {shown}"),
    }
    // Nothing English left in the block but identifiers and names.
    let block = stocklock::wire::Said {
        en: String::new(),
        zh: [
            &shown["list"],
            &shown["lines"],
            &shown["verdict"],
            &shown["bounds"],
        ]
        .map(|v| v.to_string())
        .join(" "),
    };
    assert_eq!(block.stray_english(&[]), Vec::<String>::new(), "{shown}");
}

fn texts(verdict: &check::Verdict) -> Vec<String> {
    listed(&verdict.trace, false)
}

#[tokio::test]
async fn a_lesson_step_shows_the_checkers_verdict_and_draws_its_trace() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let (url, _redis, _store, tasks) = serve().await;
    browser.goto(&format!("{url}/lessons")).await;
    let step1 = "[data-step=one-instance] [data-field=model]";
    browser
        .wait_until(&format!(
            "document.querySelector('{step1}').dataset.state === 'done'"
        ))
        .await;
    // Loaded as a step comes near the screen: the last one is far below.
    assert_eq!(
        browser
            .run("return document.querySelector('[data-step=lua-batch] [data-field=model]').dataset.state || null")
            .await,
        json!(null)
    );

    // Step 4: setnx crashes between SETNX and EXPIRE.
    let crash = check::check(Variant::Setnx, Scenario::CrashAfterAcquire).unwrap();
    let drawn = draw::timeline(&crash).unwrap();
    browser
        .run("document.querySelector('[data-step=setnx-crash]').scrollIntoView(); return true")
        .await;
    let shown = shown_drawn(&browser, "[data-step=setnx-crash] [data-field=model]").await;
    assert_eq!(shown["state"], "done", "{shown}");
    assert_eq!(shown["model"], "deadlock", "{shown}");
    assert_eq!(
        shown["line"],
        format!(
            "The experiment showed it once; the checker shows the shortest way it happens: {} steps.",
            crash.trace.len()
        ),
        "{shown}"
    );
    assert_eq!(shown["list"], json!(texts(&crash)), "{shown}");
    assert_eq!(
        shown["sections"],
        json!(drawn.sections.len().to_string()),
        "{shown}"
    );
    assert!(
        shown["bounds"].as_str().unwrap().contains("1 crash"),
        "{shown}"
    );

    // Step 10: fenced, with no counterexample.
    let fenced = check::check(Variant::Fenced, Scenario::PauseHolder).unwrap();
    browser
        .run("document.querySelector('[data-step=fencing]').scrollIntoView(); return true")
        .await;
    let field = "[data-step=fencing] [data-field=model]";
    browser
        .wait_until(&format!(
            "document.querySelector('{field}').dataset.state === 'done'"
        ))
        .await;
    let shown = browser.run_with(SHOWN, json!([field])).await;
    assert_eq!(
        shown["line"],
        format!(
            "No schedule within these bounds breaks it ({} states).",
            fenced.states
        ),
        "{shown}"
    );
    // No counterexample: the witness it rests on, drawn and listed.
    let shown = shown_drawn(&browser, field).await;
    assert_eq!(shown["steps"], json!("0"), "{shown}");
    let witness = listed(&fenced.witness, false);
    assert!(!witness.is_empty());
    assert_eq!(shown["list"], json!(witness), "{shown}");
    assert!(
        shown["bounds"].as_str().unwrap().contains("1 freeze"),
        "{shown}"
    );

    // 中文
    browser.click("#lang").await;
    let line = browser
        .run(&format!(
            "return document.querySelector('{field} .check-line').textContent"
        ))
        .await;
    assert!(
        line.as_str().unwrap().contains("没有任何调度顺序"),
        "{line}"
    );
    // The checker's own words too: the server's Chinese of each.
    shows_in_chinese(&browser, field, &fenced).await;
    shows_in_chinese(
        &browser,
        "[data-step=setnx-crash] [data-field=model]",
        &crash,
    )
    .await;
    browser
        .run("document.querySelector('[data-step=setnx-crash] [data-field=model]').scrollIntoView(); return true")
        .await;
    browser.screenshot("lessons-check.png").await;
    browser.quit().await;
    tasks.iter().for_each(|t| t.abort());
}

#[tokio::test]
async fn a_cards_scenarios_show_the_model_beside_the_live_verdict_and_open_its_trace() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let (url, _redis, store, tasks) = serve().await;
    // The cells a finished `lab --variant setnx` left: one with the
    // checker's verdict, one from a record without it (an older run's);
    // and lua-then-queue's unit lost before its XADD.
    let crash = check::check(Variant::Setnx, Scenario::CrashAfterAcquire).unwrap();
    let mut conn = store.conn().await.unwrap();
    // A finished lab of `variant`, as the dashboard's runs record it.
    let mut finished = async |variant: &str, cells: serde_json::Value| {
        let lab = json!({"state": "done", "cells": cells});
        let key = stocklock::dashboard::labs::STATUS_KEY;
        let _: i64 = redis::AsyncCommands::hset(&mut conn, key, variant, lab.to_string())
            .await
            .unwrap();
    };
    finished(
        "setnx",
        json!([
            {"scenario": "crash-after-acquire", "variant": "setnx", "expected": "deadlock",
             "observed": "deadlock", "pass": true, "evidence": "a lock with no TTL", "model": crash.summary(),
             "model_zh": crash.summary_zh()},
            {"scenario": "redis-failover", "variant": "setnx", "expected": "oversells",
             "observed": "oversells", "pass": true, "evidence": "two holders"},
        ]),
    )
    .await;
    let lost = check::check(Variant::LuaThenQueue, Scenario::CrashBeforeEnqueue).unwrap();
    finished(
        "lua-then-queue",
        json!([
            {"scenario": "crash-before-enqueue", "variant": "lua-then-queue", "expected": "loses units",
             "observed": "loses units", "pass": true, "evidence": "1 unit lost", "model": lost.summary()},
        ]),
    )
    .await;

    browser.goto(&format!("{url}/")).await;
    let cells = "[data-variant=setnx] .scenarios .cell";
    browser
        .wait_until(&format!(
            "document.querySelectorAll('{cells}').length === 2"
        ))
        .await;
    let lines = browser
        .run(&format!(
            "return [...document.querySelectorAll('{cells}')].map((c) => [c.dataset.model, c.querySelector('[data-field=model]').textContent])"
        ))
        .await;
    assert_eq!(lines[0][0], json!(crash.summary()), "{lines}");
    assert!(
        lines[0][1]
            .as_str()
            .unwrap()
            .starts_with(&format!(" · model: {}", crash.summary())),
        "{lines}"
    );
    assert_eq!(lines[1][1], " · model: none (the lab alone)", "{lines}");
    // What was observed is coloured by what it is, not by whether it was
    // predicted: a predicted deadlock and oversell are red, their marks
    // (the prediction held) green. Both were drawn green before.
    let colours = browser
        .run(&format!(
            "return [...document.querySelectorAll('{cells}')].map((c) => [getComputedStyle(c.querySelector('.observed')).color, getComputedStyle(c.querySelector('.mark')).color])"
        ))
        .await;
    let (red, green) = ("rgb(255, 77, 79)", "rgb(61, 220, 132)");
    assert_eq!(colours, json!([[red, green], [red, green]]), "{colours}");

    browser
        .click("[data-variant=setnx] [data-action=model-trace]")
        .await;
    let shown = shown_drawn(&browser, "[data-variant=setnx] [data-field=model-view]").await;
    assert_eq!(shown["model"], "deadlock", "{shown}");
    assert_eq!(shown["list"], json!(texts(&crash)), "{shown}");
    // The order pipeline's cell: its trace, and its bounds in words.
    let card = "[data-variant=lua-then-queue]";
    browser
        .wait_until(&format!(
            "document.querySelector('{card} [data-action=model-trace]') !== null"
        ))
        .await;
    browser
        .click(&format!("{card} [data-action=model-trace]"))
        .await;
    let shown = shown_drawn(&browser, &format!("{card} [data-field=model-view]")).await;
    assert_eq!(shown["model"], "loses units", "{shown}");
    assert_eq!(shown["list"], json!(texts(&lost)), "{shown}");
    let bounds = shown["bounds"].as_str().unwrap();
    assert!(
        bounds.contains("1 crash, orders through the stream, the worker and PostgreSQL"),
        "{shown}"
    );

    // 中文: the model's line in the server's Chinese (a record without it
    // keeps its English), and the opened traces' steps, property and words.
    browser.click("#lang").await;
    shows_in_chinese(
        &browser,
        "[data-variant=setnx] [data-field=model-view]",
        &crash,
    )
    .await;
    shows_in_chinese(&browser, &format!("{card} [data-field=model-view]"), &lost).await;
    let lines = browser
        .run(&format!(
            "return [...document.querySelectorAll('{cells}')].map((c) => c.querySelector('[data-field=model]').textContent)"
        ))
        .await;
    assert!(
        lines[0]
            .as_str()
            .unwrap()
            .starts_with(&format!(" · 模型:{}", crash.summary_zh())),
        "{lines}"
    );
    assert_eq!(lines[1], " · 模型:无(只有实验)", "{lines}");
    browser.screenshot("dashboard-check.png").await;
    browser.quit().await;
    tasks.iter().for_each(|t| t.abort());
}
