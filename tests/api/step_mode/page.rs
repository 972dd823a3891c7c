//! The step page as a newcomer meets it: each lane says which instance
//! its buyer went through, the stock it read and what it was told, in
//! colours one can read; a new pick forgets the run of the old one; a
//! refused request is said in words; the controls are styled, why a cell
//! cannot be played is written out, and on a phone the stores stay in
//! sight beside the lanes.

use serde_json::{Value, json};
use stocklock::variants::{Scenario, Variant};

use super::{Page, lane};
use crate::browser::Browser;
use crate::helpers::Stack;

/// WCAG's contrast ratio of each element matching `arguments[0]`: its
/// text colour against the first background up its ancestors that is
/// not transparent.
const CONTRAST: &str = "const parse = (c) => c.match(/[\\d.]+/g).map(Number);
     const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
       return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
     const behind = (el) => { for (let e = el; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor);
       if (c.length < 4 || c[3] > 0) return c; } return [255, 255, 255]; };
     return [...document.querySelectorAll(arguments[0])].map((el) => {
       const a = lum(parse(getComputedStyle(el).color)), b = lum(behind(el));
       return [el.textContent, (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)]; });";

/// What lane `buyer` says, field by field.
async fn said(page: &Page<'_>, buyer: &str) -> Value {
    page.browser
        .run_with(
            "const l = document.querySelector(`#lanes .lane[data-buyer=${arguments[0]}]`);
             const f = (name) => { const p = l.querySelector(`[data-field=${name}]`); return p ? p.textContent : null; };
             const next = l.querySelector('.lane-next');
             return {instance: f('instance'), read: f('read'), said: f('said'), answer: l.dataset.answer || null,
                     next: next ? next.textContent : null};",
            json!([buyer]),
        )
        .await
}

/// Picks `cell` in the form as a learner does: the select changes.
async fn choose(browser: &Browser, cell: &str) {
    browser
        .run_with(
            "const c = document.getElementById('cell'); c.value = arguments[0];
             c.dispatchEvent(new Event('change', {bubbles: true})); return true",
            json!([cell]),
        )
        .await;
}

#[tokio::test]
async fn each_lane_says_what_its_buyer_read_and_got_and_a_new_pick_forgets_the_old_run() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    // Step mode's buyers go through two instances at least.
    let stack = Stack::start(2, None).await;
    super::open(&browser, &stack).await;
    let page = Page { browser: &browser };

    // none: no lock to take, so its first step is the read (the lanes
    // said "next: take the lock").
    page.start(Variant::None, Scenario::Race, 3).await;
    let b = said(&page, "B").await;
    assert_eq!(
        b["next"], "next: GET stock (there is no lock to take)",
        "{b}"
    );
    // A and B read 2 before either writes: the lost update, lane by lane.
    page.advance("A", "before_write").await;
    page.advance("B", "before_write").await;
    for buyer in ["A", "B"] {
        let shown = said(&page, buyer).await;
        assert_eq!(shown["read"], "read the stock: 2", "{buyer}: {shown}");
        let via = shown["instance"].as_str().unwrap_or_default();
        assert!(
            via.starts_with("through instance ") && via.len() > "through instance ".len(),
            "{buyer}: {shown}"
        );
    }
    let shown = page.finish().await;
    for buyer in ["A", "B"] {
        let got = said(&page, buyer).await;
        assert_eq!(got["said"], "got unit 2: a sale (200)", "{buyer}: {got}");
        assert_eq!(got["answer"], "sold", "{buyer}: {got}");
    }
    assert_eq!(lane(&shown, "C")["state"], "answered", "{shown}");
    // Every line of every finished lane is readable: WCAG AA, 4.5:1 (the
    // answered lanes were light text on a light green, 1.1:1).
    let ratios = browser.run_with(CONTRAST, json!(["#lanes .lane p"])).await;
    for line in ratios.as_array().unwrap() {
        assert!(line[1].as_f64().unwrap() >= 4.5, "{ratios}");
    }
    // The learner's run beside the checker's, counted in words.
    let taken = shown["steps"].as_i64().unwrap();
    let checker = browser
        .run("return document.querySelector('#verdict [data-field=checker]').textContent")
        .await;
    assert!(
        checker
            .as_str()
            .unwrap()
            .ends_with(&format!("your run took {taken} steps on this stack.")),
        "{checker}"
    );
    super::levels::a_broken_cell_is_a_level_won_against_par_with_a_permalink(&page, &stack, taken)
        .await;
    assert_eq!(
        browser.run("return [stepCount(1), stepCount(3)]").await,
        json!(["1 step", "3 steps"]),
        "\"in 1 steps\""
    );

    // A new pick: nothing of the none run stays under lua's name.
    choose(&browser, "lua/race").await;
    let cleared = browser
        .run(
            "const main = document.getElementById('step');
             return {run: main.dataset.run || null, lanes: document.querySelectorAll('#lanes .lane').length,
               verdict: document.getElementById('verdict').hidden, steps: document.querySelectorAll('#steps li').length,
               stores: [...document.querySelectorAll('#state [data-field]')].map((d) => d.textContent)}",
        )
        .await;
    assert_eq!(
        cleared,
        json!({"run": null, "lanes": 0, "verdict": true, "steps": 0, "stores": ["–", "–", "–", "–", "–", "–"]}),
        "the old run stayed on screen"
    );

    // A body the server cannot read is said in words, not in serde's,
    // and a new pick clears it.
    browser
        .run("admin('POST', '/api/admin/step', {variant: 3}); return true")
        .await;
    browser
        .wait_until("document.getElementById('message').textContent.startsWith('the server')")
        .await;
    let message = browser
        .run("return document.getElementById('message').textContent")
        .await;
    assert_eq!(
        message,
        "the server could not read what the page sent; reload the page"
    );
    choose(&browser, "token/slow-business").await;
    assert_eq!(
        browser
            .run("return document.getElementById('message').textContent")
            .await,
        ""
    );

    // Styled controls: no default white 13 px select, no default blue link.
    let styled = browser
        .run(
            "const c = getComputedStyle(document.getElementById('cell'));
             return [c.backgroundColor, parseFloat(c.fontSize), getComputedStyle(document.querySelector('.nav a')).color]",
        )
        .await;
    assert_ne!(styled[0], "rgb(255, 255, 255)", "{styled}");
    assert!(styled[1].as_f64().unwrap() >= 16.0, "{styled}");
    assert_eq!(styled[2], "rgb(77, 163, 255)", "{styled}");
    // Why a cell is not played, written out (a disabled option's tooltip
    // never shows on a touch screen).
    browser.click("#why-not summary").await;
    let why = browser
        .run("return document.getElementById('why-not').innerText")
        .await;
    let why = why.as_str().unwrap();
    assert!(
        why.contains("a paused Redis would stop every learner's run")
            && why.contains("redlock · race"),
        "{why}"
    );

    // A phone: the lanes and what the stores hold on one screen.
    browser.resize(390, 844, true).await;
    page.start(Variant::None, Scenario::Race, 3).await;
    let fit = browser
        .run(
            "document.getElementById('lanes').scrollIntoView();
             const stores = document.getElementById('state').getBoundingClientRect();
             return [stores.bottom, window.innerHeight, document.documentElement.scrollWidth]",
        )
        .await;
    browser.screenshot("step-phone.png").await;
    assert!(
        fit[0].as_f64().unwrap() <= fit[1].as_f64().unwrap(),
        "the stores are below the screen: {fit}"
    );
    assert!(
        fit[2].as_f64().unwrap() <= 390.0,
        "wider than the phone: {fit}"
    );
    browser.quit().await;
    stack.stop().await;
}
