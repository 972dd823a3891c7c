//! The lesson path in a real browser: every step's button runs its
//! experiment on a live stack, and the page shows the lab's verdict, the
//! ledger's numbers and a timeline whose overlaps are the witness's.

use std::time::Duration;

use serde_json::json;
use stocklock::knobs::Sku;
use stocklock::lab::Scenario;
use stocklock::lessons::STEPS;
use stocklock::store::{Keys, Store};
use stocklock::timeline;
use stocklock::variants::Variant;

use crate::browser::Browser;
use crate::helpers::{Stack, within};

/// What the page shows of a step once it is done.
const SHOWN: &str = "const step = document.querySelector(`[data-step=${arguments[0]}]`);
     const f = (name) => step.querySelector(`[data-field=${name}]`);
     const t = f('timeline');
     return {state: step.dataset.state, verdict: f('verdict').textContent, pass: f('pass').dataset.pass,
       expected: f('expected').textContent, evidence: f('evidence').textContent,
       initial: f('initial').textContent, sold: f('sold').textContent,
       remaining: f('remaining').textContent, oversold: f('oversold').textContent,
       drawn: t.dataset.drawn, sections: t.dataset.sections, overlaps: t.dataset.overlaps,
       cross: t.dataset.crossOverlaps, counted_in: t.dataset.countedIn};";

#[tokio::test]
async fn the_lesson_path_runs_each_experiment_and_shows_its_verdict_ledger_and_race() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    // With PostgreSQL: the database step sells from it.
    let stack = Stack::start_with(2, None, &["--orders", "on"]).await;
    let store = Store::open(stack.redis_url.as_deref().unwrap()).unwrap();
    let mut conn = store.conn().await.unwrap();
    browser
        .goto(&format!("{}/lessons#token={}", stack.url, stack.token))
        .await;
    browser
        .wait_until(&format!(
            "document.querySelectorAll('section.step').length === {}",
            STEPS.len()
        ))
        .await;

    within(Duration::from_secs(600), async {
        for step in &STEPS {
            browser
                .click(&format!("[data-step={}] [data-action=run]", step.id))
                .await;
            browser
                .wait_until(&format!(
                    "['done', 'failed'].includes(document.querySelector('[data-step={}]').dataset.state)",
                    step.id
                ))
                .await;
            let shown = browser.run_with(SHOWN, json!([step.id])).await;
            eprintln!("lesson {}: {shown}", step.id);
            assert_eq!(shown["state"], "done", "{}: {shown}", step.id);

            // The verdict is the lab's, and what the articles say of this step.
            let variant: Variant = step.variant.parse().unwrap();
            let scenario: Scenario = step.scenario.parse().unwrap();
            let claim = scenario.claim(variant);
            assert_eq!(shown["verdict"], claim.behaviour.name(), "{}: {shown}", step.id);
            assert_eq!(shown["pass"], "true", "{}: {shown}", step.id);
            assert_eq!(shown["expected"], json!(claim.text()), "{}", step.id);

            // The numbers are the ledger's.
            let state = stack.state(step.variant).await;
            for (field, value) in [
                ("initial", state.initial),
                ("sold", state.sold),
                ("remaining", state.remaining),
                ("oversold", state.oversold),
            ] {
                assert_eq!(shown[field], json!(value.to_string()), "{}.{field}", step.id);
            }

            // The timeline's overlaps, counted by the page, are the witness's,
            // counted here from the sections in Redis.
            let keys = Keys::new(&Sku::parse(step.variant).unwrap());
            let sections = timeline::sections(&mut conn, &keys).await.unwrap();
            let pairs = timeline::overlaps(&sections, usize::MAX);
            let across = pairs
                .iter()
                .filter(|&&(a, b)| sections[a].instance != sections[b].instance)
                .count();
            assert_eq!(shown["drawn"], "true", "{}", step.id);
            // Drawn from a read every instance had handed its sections in
            // to: the page reads again until then.
            assert_eq!(shown["counted_in"], "true", "{}: {shown}", step.id);
            assert_eq!(shown["sections"], json!(sections.len().to_string()), "{}", step.id);
            assert_eq!(shown["overlaps"], json!(pairs.len().to_string()), "{}", step.id);
            assert_eq!(shown["cross"], json!(across.to_string()), "{}", step.id);
            match step.id {
                // Two instances, each with its own mutex: two holders at once.
                "two-instances" => assert!(across >= 1, "{shown}"),
                // One process: its mutex lets one holder in at a time.
                "one-instance" => assert_eq!(pairs.len(), 0, "{shown}"),
                // One script at a time inside Redis.
                "lua" => {
                    assert_eq!(pairs.len(), 0, "{shown}");
                    assert!(sections.iter().all(|s| s.atomic), "lua's sections are scripts");
                    assert!(sections.len() as i64 >= state.sold, "a script per sale: {shown}");
                }
                // One script per batch: its buyers' sections share its
                // moment, and a moment overlaps nothing.
                "lua-batch" => {
                    assert_eq!(pairs.len(), 0, "{shown}");
                    assert!(
                        sections.iter().all(|s| s.atomic),
                        "lua-batch's sections are scripts"
                    );
                    assert!(
                        sections.len() as i64 >= state.sold,
                        "a section per buyer of a batch: {shown}"
                    );
                }
                // One statement a sale inside the database: a moment each,
                // and the books are the database's.
                "database" => {
                    assert_eq!(pairs.len(), 0, "{shown}");
                    assert!(sections.iter().all(|s| s.atomic), "pg-update's sections are statements");
                    assert!(sections.len() as i64 >= state.sold, "a statement per sale: {shown}");
                    assert_eq!((state.sold, state.remaining), (state.initial, 0), "{shown}");
                }
                _ => {}
            }
        }
    })
    .await;

    // The page as a workshop sees it: the race of step 2.
    browser
        .run("document.querySelector('[data-step=two-instances]').scrollIntoView(); return true")
        .await;
    browser.screenshot("lessons.png").await;

    // The path's length, in words, in both languages: the page's count
    // of its experiments is the path's own (it once said twelve of
    // thirteen, in both languages).
    let steps = stocklock::lessons::STEPS.len();
    let said = || {
        browser.run("return [document.querySelector('[data-i18n=subtitle]').textContent, [...document.querySelectorAll('.intro p')].filter((p) => p.checkVisibility()).map((p) => p.textContent).join(' ')]")
    };
    let en = said().await;
    assert_eq!(en[0], format!("article 001, in {steps} experiments"));
    assert!(
        en[1]
            .as_str()
            .unwrap()
            .contains(&format!("as {steps} experiments:")),
        "{en}"
    );

    // 中文
    browser.click("#lang").await;
    let zh = said().await;
    assert_eq!(zh[0], format!("文章 001,拆成 {steps} 个实验"));
    assert!(
        zh[1]
            .as_str()
            .unwrap()
            .contains(&format!("拆成 {steps} 个实验")),
        "{zh}"
    );
    assert_ne!(
        browser
            .run("return getComputedStyle(document.querySelector('[data-step=lua] h2 [lang=zh]')).display")
            .await,
        json!("none")
    );
    assert_eq!(
        browser
            .run("return getComputedStyle(document.querySelector('[data-step=lua] h2 [lang=en]')).display")
            .await,
        json!("none")
    );
    browser.quit().await;
    stack.stop().await;
}
