//! The pages fit their screen: on a laptop (1280×800), a wider window
//! (1400×900) and a phone (390×844), in English and in 中文, no page
//! scrolls sideways and every control stays inside its card or panel.
//! Headless Chromium on a real stack, after a race has filled the cards.

use serde_json::{Value, json};

use crate::browser::Browser;
use crate::helpers::Stack;

/// Width, height, and whether it is a phone (the meta viewport applies).
const SCREENS: [(u32, u32, bool); 3] = [(1280, 800, false), (1400, 900, false), (390, 844, true)];

/// Rounding a box may get away with, in CSS pixels.
const SLACK: f64 = 1.0;

/// What does not fit on the page as it is laid out now: the page wider
/// than its viewport (naming the elements that stick out), and any
/// element of a panel (`arguments[0]`: CSS selectors) outside the panel's
/// box. Elements inside a box that clips or scrolls its content are that
/// box's business (a timeline scrolls inside its own box); hidden ones
/// (the other language, a closed `<details>`) are skipped. Each problem names the element, its
/// text and its box, and the panel's box.
const MISFITS: &str = r#"
const panels = arguments[0], slack = arguments[1];
const root = document.documentElement, viewport = root.clientWidth;
const problems = [];
const px = (r) => `[x ${Math.round(r.left)}..${Math.round(r.right)}, y ${Math.round(r.top)}..${Math.round(r.bottom)}]`;
// Not shown: the other language, a closed <details>' content, what is hidden.
const shown = (e) => e.checkVisibility({contentVisibilityAuto: true, visibilityProperty: true});
const clipped = (e, stop) => {
  for (let a = e.parentElement; a && a !== stop; a = a.parentElement)
    if (getComputedStyle(a).overflowX !== 'visible') return true;
  return false;
};
const describe = (e) => {
  let name = e.tagName.toLowerCase();
  if (e.id) name += '#' + e.id;
  for (const key of ['action', 'field', 'i18n']) if (e.dataset && e.dataset[key]) name += `[data-${key}=${e.dataset[key]}]`;
  if (!e.id && typeof e.className === 'string' && e.className.trim()) name += '.' + e.className.trim().split(/\s+/).join('.');
  const text = (e.value || e.textContent || '').trim().replace(/\s+/g, ' ');
  return text ? `${name} "${text.length > 40 ? text.slice(0, 40) + '…' : text}"` : name;
};
const outside = (r, box) => r.left < box.left - slack || r.right > box.right + slack
  || r.top < box.top - slack || r.bottom > box.bottom + slack;
if (root.scrollWidth > viewport) {
  const right = (e) => e.getBoundingClientRect().right > viewport + slack;
  const sticking = [...document.body.querySelectorAll('*')]
    .filter((e) => shown(e) && !clipped(e, null) && right(e) && !right(e.parentElement))
    .slice(0, 8).map((e) => `${describe(e)} ${px(e.getBoundingClientRect())}`);
  problems.push(`the page is ${root.scrollWidth} px wide in a ${viewport} px viewport; sticking out: ${sticking.join(', ')}`);
}
for (const selector of panels) {
  if (![...document.querySelectorAll(selector)].some(shown)) problems.push(`no panel ${selector} is shown`);
  for (const panel of document.querySelectorAll(selector)) {
    if (!shown(panel)) continue;
    const box = panel.getBoundingClientRect();
    const label = panel.dataset.variant ? `card ${panel.dataset.variant}`
      : panel.dataset.step ? `step ${panel.dataset.step}` : `panel ${selector}`;
    const before = problems.length;
    for (const e of panel.querySelectorAll('*')) {
      if (!shown(e) || clipped(e, panel)) continue;
      const r = e.getBoundingClientRect();
      if (!outside(r, box)) continue;
      const control = e.matches('button, a, input, select, summary');
      // A control always; anything else where it starts to stick out.
      if (control || !outside(e.parentElement.getBoundingClientRect(), box))
        problems.push(`${label}: ${control ? 'control ' : ''}${describe(e)} ${px(r)} is outside its box ${px(box)}`);
    }
    // Text that does not wrap sticks out without its element doing so.
    if (problems.length === before && panel.scrollWidth > panel.clientWidth + slack)
      problems.push(`${label}: its content is ${panel.scrollWidth} px wide in its ${panel.clientWidth} px box ${px(box)}`);
  }
}
return problems;
"#;

/// The panels of each page whose content must stay inside them.
const DASHBOARD: [&str; 5] = [
    "header.top",
    "section.controls",
    "section.instances",
    ".card",
    "footer.bottom",
];
const LESSONS: [&str; 4] = ["header.top", ".intro", ".step", "footer.bottom"];
const TIMELINE: [&str; 5] = [
    "header.top",
    ".timeline-controls",
    "#ledger",
    ".timeline-main",
    "footer.bottom",
];

const STEP: [&str; 7] = [
    "header.top",
    ".intro",
    "#pick",
    ".lane",
    ".faults-box",
    ".store-box",
    "footer.bottom",
];

/// Checks the page as it is now, in English and then in 中文 (the page's
/// own switch), and leaves it in English; adds what does not fit to `problems`.
async fn check_both_languages(
    browser: &Browser,
    screen: &str,
    page: &str,
    panels: &[&str],
    problems: &mut Vec<String>,
) {
    for lang in ["en", "zh"] {
        if browser.run("return document.documentElement.lang").await != json!(lang) {
            browser.click("#lang").await;
        }
        assert_eq!(
            browser.run("return document.documentElement.lang").await,
            json!(lang)
        );
        let found = browser.run_with(MISFITS, json!([panels, SLACK])).await;
        for problem in found.as_array().unwrap() {
            problems.push(format!(
                "{screen} {page} ({lang}): {}",
                problem.as_str().unwrap()
            ));
        }
    }
    browser.click("#lang").await;
}

#[tokio::test]
async fn the_pages_fit_a_laptop_and_a_phone_in_both_languages() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let stack = Stack::start(2, None).await;
    browser.resize(1280, 800, false).await;
    browser
        .goto(&format!("{}/#token={}", stack.url, stack.token))
        .await;
    browser
        .wait_until("document.querySelector('#live').dataset.live === 'true' && document.querySelectorAll('#instance-list li').length === 2")
        .await;
    // The cards as a class sees them: after a race, with verdicts and notes.
    browser.race_all(crate::browser::RACE_REQUESTS).await;
    browser.screenshot("dashboard-1280.png").await;

    let mut problems = Vec::new();
    for (width, height, phone) in SCREENS {
        let screen = format!("{width}×{height}");
        browser.resize(width, height, phone).await;
        // The page's width (a phone widens its window over a page that
        // sticks out, so the window's own width would not tell).
        let viewport = browser
            .run("return document.documentElement.clientWidth")
            .await
            .as_u64()
            .unwrap();
        assert!(
            viewport <= u64::from(width) && viewport + 20 >= u64::from(width),
            "{screen}: the viewport did not follow: {viewport} px"
        );
        check_both_languages(&browser, &screen, "/", &DASHBOARD, &mut problems).await;
        // What each card explains, opened, fits too.
        browser
            .run("document.querySelectorAll('.card details').forEach((d) => d.open = true); return true")
            .await;
        check_both_languages(
            &browser,
            &screen,
            "/ (details open)",
            &DASHBOARD,
            &mut problems,
        )
        .await;
        browser
            .run("document.querySelectorAll('.card details').forEach((d) => d.open = false); return true")
            .await;
        if phone {
            browser.screenshot("dashboard-phone.png").await;
            browser
                .run("document.querySelector('[data-variant=setnx]').scrollIntoView(); return true")
                .await;
            browser.screenshot("dashboard-phone-card.png").await;
        }
    }

    // The lessons and the timeline, loaded at each size as a reader would.
    for (width, height, phone) in SCREENS {
        let screen = format!("{width}×{height}");
        browser.resize(width, height, phone).await;
        browser.goto(&format!("{}/lessons", stack.url)).await;
        browser
            .wait_until("document.querySelectorAll('section.step').length > 0")
            .await;
        check_both_languages(&browser, &screen, "/lessons", &LESSONS, &mut problems).await;

        browser
            .goto(&format!("{}/timeline?sku=local-mutex", stack.url))
            .await;
        browser
            .wait_until(
                "['ready', 'error'].includes(document.querySelector('#timeline').dataset.state)",
            )
            .await;
        let drawn: Value = browser
            .run("const t = document.querySelector('#timeline'); return [t.dataset.state, t.dataset.drawn === 'true']")
            .await;
        assert_eq!(
            drawn,
            json!(["ready", true]),
            "{screen}: the timeline is drawn"
        );
        check_both_languages(&browser, &screen, "/timeline", &TIMELINE, &mut problems).await;
        if phone {
            browser.screenshot("timeline-phone.png").await;
        }

        // Step mode, a run under way: token's lease run out under A.
        browser
            .goto(&format!(
                "{}/step?variant=token&scenario=slow-business",
                stack.url
            ))
            .await;
        browser.press("n").await;
        browser
            .wait_until("document.querySelectorAll('#lanes .lane button').length === 3")
            .await;
        for key in ["1", "1"] {
            let version = browser
                .run("return Number(document.getElementById('step').dataset.version)")
                .await;
            browser.press(key).await;
            browser
                .wait_until(&format!(
                    "Number(document.getElementById('step').dataset.version) > {version}"
                ))
                .await;
        }
        check_both_languages(&browser, &screen, "/step", &STEP, &mut problems).await;
        let name = format!("step-mode-{}.png", if phone { "390" } else { "1280" });
        if width != 1400 {
            browser.screenshot(&name).await;
        }
    }

    browser.quit().await;
    stack.stop().await;
    assert!(
        problems.is_empty(),
        "{} things do not fit:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
