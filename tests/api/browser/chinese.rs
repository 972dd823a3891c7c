//! The Chinese pages say everything in Chinese: after a race, a lab
//! cell's evidence, a lesson's experiment and a step run, the words shown
//! are Chinese but for code (`<code>`, `<pre>`, `<kbd>`), identifiers
//! (variants, scenarios, faults, knobs, gates, Redis commands) and product
//! names. Headless Chromium on a real stack, the pages switched to 中文 by
//! their own button.

use serde_json::json;

use stocklock::variants::Variant;
use stocklock::wire::said;

use super::Browser;
use crate::helpers::Stack;

/// Every visible text node of the page outside code, with the element it
/// is in: `[element, text]`. Which words of it are English is the server's
/// own rule, applied in Rust ([`said::english_words`]).
const TEXTS: &str = r#"
const texts = [];
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
// The language switch names the other language, in that language.
const code = 'code, pre, kbd, samp, script, style, noscript, svg, #lang';
const describe = (e) => {
  let name = e.tagName.toLowerCase();
  if (e.id) name += '#' + e.id;
  for (const key of ['field', 'i18n', 'variant', 'step']) if (e.dataset[key]) name += `[data-${key}=${e.dataset[key]}]`;
  return name;
};
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  const parent = node.parentElement;
  if (!parent || parent.closest(code)) continue;
  if (!parent.checkVisibility({contentVisibilityAuto: true, visibilityProperty: true})) continue;
  if (/[A-Za-z]/.test(node.textContent)) texts.push([describe(parent), node.textContent]);
}
return texts;
"#;

/// Adds the English of the page shown to `found`, under `what`: each text
/// with Latin words that are neither code, identifiers, kept names
/// ([`said::KEPT`]) nor the lab's variants and scenarios.
async fn scan(browser: &Browser, what: &str, found: &mut Vec<String>) {
    assert_eq!(
        browser.run("return document.documentElement.lang").await,
        json!("zh"),
        "{what} is in Chinese"
    );
    let names = Variant::and_scenario_names();
    let texts = browser.run(TEXTS).await;
    for pair in texts.as_array().unwrap() {
        let (element, text) = (pair[0].as_str().unwrap(), pair[1].as_str().unwrap());
        let english: Vec<String> = said::english_words(text)
            .into_iter()
            .filter(|w| !names.iter().any(|n| n.eq_ignore_ascii_case(w)))
            .collect();
        if !english.is_empty() {
            let shown: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
            let shown: String = shown.chars().take(120).collect();
            let line = format!("{what}: {element}: {} | \"{shown}\"", english.join(" "));
            if !found.contains(&line) {
                found.push(line);
            }
        }
    }
}

/// Opens `path` as the teacher does, waits for `ready`, and switches the
/// page to Chinese if it is not.
async fn open(browser: &Browser, stack: &Stack, path: &str, ready: &str) {
    browser
        .goto(&format!("{}{path}#token={}", stack.url, stack.token))
        .await;
    browser.wait_until(ready).await;
    if browser.run("return document.documentElement.lang").await != json!("zh") {
        browser.click("#lang").await;
    }
}

#[tokio::test]
async fn the_chinese_pages_show_no_english_outside_code() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let stack = Stack::start(2, None).await;
    let mut found = Vec::new();
    browser.resize(1280, 900, false).await;

    // The dashboard after a race, every card's details open.
    open(
        &browser,
        &stack,
        "/",
        "document.querySelector('#live').dataset.live === 'true'",
    )
    .await;
    browser.race_all(super::RACE_REQUESTS).await;
    browser
        .run("document.querySelectorAll('details').forEach((d) => d.open = true); return true")
        .await;
    scan(&browser, "/ after a race", &mut found).await;

    // A lesson's experiment: a lab cell run, its evidence, the checker's
    // verdict and trace, the history checker's.
    open(
        &browser,
        &stack,
        "/lessons",
        "document.querySelectorAll('section.step').length > 0",
    )
    .await;
    let first = browser
        .run("return document.querySelector('section.step').dataset.step")
        .await;
    let step = first.as_str().unwrap();
    browser
        .click(&format!("[data-step={step}] [data-action=run]"))
        .await;
    browser
        .wait_until(&format!(
            "['done', 'failed'].includes(document.querySelector('[data-step={step}]').dataset.state)"
        ))
        .await;
    browser
        .run("document.querySelectorAll('details').forEach((d) => d.open = true); return true")
        .await;
    scan(&browser, "/lessons after a run", &mut found).await;

    // Step mode: the checker's shortest way of none · race played to its
    // verdict, then whether any way breaks lua.
    open(
        &browser,
        &stack,
        "/step?variant=none&scenario=race",
        "document.querySelectorAll('#cell option').length > 20",
    )
    .await;
    let page = crate::step_mode::Page { browser: &browser };
    let shown = page.shortest_by_itself().await;
    assert_eq!(shown["over"], json!(true), "{shown}");
    browser
        .run("document.querySelectorAll('details').forEach((d) => d.open = true); return true")
        .await;
    scan(&browser, "/step after a run", &mut found).await;
    // "Is there any way?": an exploration's schedule that broke it, said.
    browser
        .run("delete document.getElementById('anyway-result').dataset.state; return true")
        .await;
    browser.press("a").await;
    browser
        .wait_until("document.getElementById('anyway-result').dataset.state === 'done'")
        .await;
    assert_eq!(
        browser
            .run("return document.getElementById('anyway-result').dataset.found")
            .await,
        json!("true")
    );
    scan(&browser, "/step after \"Is there any way?\"", &mut found).await;

    // The other pages as they load.
    for (path, ready) in [
        (
            "/timeline?sku=none",
            "['ready', 'error'].includes(document.querySelector('#timeline').dataset.state)",
        ),
        ("/soak", "!document.getElementById('none').hidden"),
        (
            "/classroom",
            "document.getElementById('classroom').dataset.open !== 'unknown'",
        ),
    ] {
        open(&browser, &stack, path, ready).await;
        scan(&browser, path, &mut found).await;
    }

    assert!(
        found.is_empty(),
        "{} texts with English on the Chinese pages:\n{}",
        found.len(),
        found.join("\n")
    );
    browser.quit().await;
    stack.stop().await;
}
