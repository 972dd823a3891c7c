//! Every page in a real browser, as a teacher opens it (with the admin
//! token): its console (no request fails, as the icon's 404 on every page
//! and the soak page's 404 each second while no soak ran did; no script
//! error), and its accessibility, checked by a real tool: axe-core (from
//! the npm registry, fetched by scripts/axe.sh into target/axe) at 1280
//! and 390 px, in English and in Chinese. No violation of WCAG 2.1 A or AA
//! that axe rates serious or critical.

use serde_json::{Value, json};

use super::Browser;
use crate::helpers::Stack;

/// Where scripts/axe.sh puts axe-core.
const AXE: &str = "target/axe/node_modules/axe-core/axe.min.js";

/// Runs axe on the page shown: its serious and critical violations.
const RUN: &str = "const done = arguments[arguments.length - 1];
  axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}})
    .then((r) => done(r.violations.filter((v) => ['serious', 'critical'].includes(v.impact))
      .map((v) => ({id: v.id, impact: v.impact, help: v.help,
        nodes: v.nodes.slice(0, 4).map((n) => `${n.target.join(' ')}: ${n.failureSummary}`)}))),
      (e) => done([{id: 'axe failed', help: String(e)}]));";

/// Each page, with what shows it has done its first requests.
const PAGES: [(&str, &str); 6] = [
    (
        "/",
        "document.querySelector('#live').dataset.live === 'true'",
    ),
    (
        "/lessons",
        "document.querySelectorAll('section.step').length > 0",
    ),
    (
        "/timeline?sku=lua",
        "document.getElementById('lang') !== null",
    ),
    (
        "/step",
        "document.querySelectorAll('#cell option').length > 20",
    ),
    ("/soak", "!document.getElementById('none').hidden"),
    (
        "/classroom",
        "document.getElementById('classroom').dataset.open !== 'unknown'",
    ),
];

#[tokio::test]
async fn no_page_logs_an_error_or_has_a_serious_accessibility_violation() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let axe = std::fs::read_to_string(root.join(AXE));
    if axe.is_err() {
        crate::helpers::missing_tool(&format!(
            "the pages' accessibility: {AXE} is missing (scripts/axe.sh fetches it)"
        ));
    }
    let Some(browser) = Browser::start().await else {
        return;
    };
    let stack = Stack::start(1, None).await;
    let (mut errors, mut violations) = (Vec::new(), Vec::new());
    for (path, ready) in PAGES {
        browser.resize(1280, 900, false).await;
        browser
            .goto(&format!("{}{path}#token={}", stack.url, stack.token))
            .await;
        browser.wait_until(ready).await;
        // The soak page polls every second: three polls, all quiet.
        if path == "/soak" {
            browser.polls("/api/soak", 3).await;
        }
        for entry in browser.console().await {
            if entry["level"] == "SEVERE" {
                errors.push(format!("{path}: {}", entry["message"]));
            }
        }
        let Ok(axe) = &axe else { continue };
        browser.run(&format!("{axe}\n;return true")).await;
        // Both languages (the page's own switch) at both widths, on the
        // page as loaded: its layout follows the window.
        for _ in 0..2 {
            let lang = browser.run("return document.documentElement.lang").await;
            for (width, height) in [(1280, 900), (390, 844)] {
                browser.resize(width, height, width < 500).await;
                let found = browser.run_async(RUN, json!([])).await;
                for violation in found.as_array().cloned().unwrap_or_default() {
                    violations.push(
                        json!({"page": path, "width": width, "lang": lang, "violation": violation}),
                    );
                }
            }
            browser.resize(1280, 900, false).await;
            browser.click("#lang").await;
        }
    }
    assert!(errors.is_empty(), "{errors:#?}");
    let violations: Vec<Value> = violations;
    assert!(
        violations.is_empty(),
        "{}",
        serde_json::to_string_pretty(&violations).unwrap()
    );
    browser.quit().await;
    stack.stop().await;
}
