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

/// The English words shown on the page (`arguments[0]`: the words allowed,
/// lower case): every visible text node outside code, each Latin word of
/// two letters or more that is neither all capitals (an acronym, a
/// command), nor joined to an identifier's marks (`_`, `-`, `.`, `/`,
/// `:`, `?`, `=`, `&`, a digit), nor allowed: the rule of
/// `Said::stray_english`, which the server's own Chinese is tested by.
/// Each text with its English words and the element it is in.
const ENGLISH: &str = r#"
const allowed = new Set(arguments[0]);
const found = [];
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
  const text = node.textContent, words = [];
  for (const match of text.matchAll(/[A-Za-z][A-Za-z0-9_\-.\/:?=&']*/g)) {
    const word = match[0].replace(/[.:'\/\-?=&]+$/, '');
    const before = text[match.index - 1] || '';
    if (word.length < 2 || /[0-9_\-./:?=&]/.test(word) || /[0-9_\-./:?=&]/.test(before)) continue;
    if (word === word.toUpperCase()) continue;
    if (!allowed.has(word.toLowerCase())) words.push(word);
  }
  if (words.length) found.push(`${describe(parent)}: ${words.join(' ')} | "${text.trim().replace(/\s+/g, ' ').slice(0, 120)}"`);
}
return [...new Set(found)];
"#;

/// What may stay Latin on a Chinese page: the names and terms Chinese
/// keeps ([`said::KEPT`], the rule the server's own Chinese is tested by),
/// and the identifiers of the lab (variants, scenarios).
fn allowed() -> Vec<String> {
    (said::KEPT.into_iter())
        .chain(Variant::and_scenario_names())
        .map(str::to_lowercase)
        .collect()
}

/// Adds the English of the page shown to `found`, under `what`.
async fn scan(browser: &Browser, words: &[String], what: &str, found: &mut Vec<String>) {
    assert_eq!(
        browser.run("return document.documentElement.lang").await,
        json!("zh"),
        "{what} is in Chinese"
    );
    let english = browser.run_with(ENGLISH, json!([words])).await;
    for line in english.as_array().unwrap() {
        found.push(format!("{what}: {}", line.as_str().unwrap()));
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
    let words = allowed();
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
    scan(&browser, &words, "/ after a race", &mut found).await;

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
    scan(&browser, &words, "/lessons after a run", &mut found).await;

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
    scan(&browser, &words, "/step after a run", &mut found).await;
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
    scan(
        &browser,
        &words,
        "/step after \"Is there any way?\"",
        &mut found,
    )
    .await;

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
        scan(&browser, &words, path, &mut found).await;
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
