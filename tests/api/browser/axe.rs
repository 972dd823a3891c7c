//! Accessibility, checked by a real tool: axe-core (from the npm registry,
//! installed by scripts/test.sh under target/axe) run in Chromium on every
//! page, at 1280 and at 390 px, in English and in Chinese. No violation
//! of WCAG 2.1 A or AA that axe rates serious or critical.

use serde_json::{Value, json};

use super::Browser;
use crate::helpers::Stack;

/// Where scripts/test.sh installs axe-core.
const AXE: &str = "target/axe/node_modules/axe-core/axe.min.js";

/// Runs axe on the page shown: its serious and critical violations.
const RUN: &str = "const done = arguments[arguments.length - 1];
  axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}})
    .then((r) => done(r.violations.filter((v) => ['serious', 'critical'].includes(v.impact))
      .map((v) => ({id: v.id, impact: v.impact, help: v.help,
        nodes: v.nodes.slice(0, 4).map((n) => `${n.target.join(' ')}: ${n.failureSummary}`)}))),
      (e) => done([{id: 'axe failed', help: String(e)}]));";

#[tokio::test]
async fn no_page_has_a_serious_or_critical_accessibility_violation() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let Ok(axe) = std::fs::read_to_string(root.join(AXE)) else {
        crate::helpers::missing_tool(&format!(
            "accessibility test: {AXE} is missing (scripts/test.sh installs it: npm install --prefix target/axe axe-core)"
        ));
        return;
    };
    let Some(browser) = Browser::start().await else {
        return;
    };
    let stack = Stack::start(1, None).await;
    // Each page, with what shows it has drawn itself.
    let pages = [
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
            "document.querySelector('canvas, .tl-empty, #timeline') !== null",
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
    let mut found = Vec::new();
    for (width, height) in [(1280, 900), (390, 844)] {
        browser.resize(width, height, width < 500).await;
        for lang in ["en", "zh"] {
            for (path, ready) in pages {
                let url = format!("{}{path}#token={}", stack.url, stack.token);
                browser
                    .run_with(
                        "localStorage.setItem('stocklock.lang', arguments[0]); return true",
                        json!([lang]),
                    )
                    .await;
                browser.goto(&url).await;
                browser.wait_until(ready).await;
                browser.run(&format!("{axe}\n;return true")).await;
                let violations = browser.run_async(RUN, json!([])).await;
                for violation in violations.as_array().cloned().unwrap_or_default() {
                    found.push(
                        json!({"page": path, "width": width, "lang": lang, "violation": violation}),
                    );
                }
            }
        }
    }
    let found: Vec<Value> = found;
    assert!(
        found.is_empty(),
        "{}",
        serde_json::to_string_pretty(&found).unwrap()
    );
    browser.quit().await;
    stack.stop().await;
}
