//! Racing every variant from the page: the cards show what the ledger
//! shows, the scenarios run from a card, and the page in Chinese.

use serde_json::json;
use stocklock::variants::Variant;

use super::{Browser, RACE_REQUESTS};
use crate::helpers::Stack;

#[tokio::test]
async fn race_all_from_the_page_shows_oversell_where_the_ledger_does() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let stack = Stack::start(2, None).await;

    browser
        .goto(&format!("{}/#token={}", stack.url, stack.token))
        .await;
    // Live: the event stream is open and the board has been drawn.
    browser
        .wait_until("document.querySelector('#live').dataset.live === 'true' && document.querySelector('[data-variant=lua] [data-field=initial]').textContent === '50'")
        .await;
    // The token moved from the URL into the tab's session storage.
    assert_eq!(browser.run("return location.hash").await, json!(""));

    browser.race_all(RACE_REQUESTS).await;

    let cards = browser
        .run(
            "const out = {};
             for (const card of document.querySelectorAll('.card')) {
               const f = (name) => card.querySelector(`[data-field=${name}]`).textContent;
               out[card.dataset.variant] = {remaining: f('remaining'), sold: f('sold'), oversold: f('oversold'),
                 duplicates: f('duplicates'), busy: f('busy'), verdict: f('verdict'), unsold: f('unsold'),
                 broken: f('broken'), history: card.querySelector('[data-field=history]').dataset.verdict,
                 history_text: f('history'),
                 red: card.querySelector('[data-field=oversold]').classList.contains('bad')};
             }
             return out;",
        )
        .await;
    // Every card, as the ledger has it.
    for variant in Variant::names() {
        let variant = variant.as_str();
        let state = stack.state(variant).await;
        let card = &cards[variant];
        for (field, value) in [
            ("remaining", state.remaining),
            ("sold", state.sold),
            ("oversold", state.oversold),
            ("duplicates", state.duplicates),
            ("busy", state.busy),
        ] {
            assert_eq!(
                card[field],
                json!(value.to_string()),
                "{variant}.{field}: {card}"
            );
        }
        assert_eq!(card["red"], json!(state.oversold > 0), "{variant}");
        assert_eq!(card["broken"], json!(""), "{variant}: {card}");
        // Under-selling shows where the ledger has stock left and buyers refused.
        let unsold = if state.remaining > 0 && state.busy > 0 {
            format!(
                "unsold {} while {} buyers were refused",
                state.remaining, state.busy
            )
        } else {
            String::new()
        };
        assert_eq!(card["unsold"], json!(unsold), "{variant}");
        assert_eq!(
            state.initial, 50,
            "race all resets every SKU to the form's stock"
        );
    }
    // `none` oversells whichever instances nginx picks: its 64 buyers at
    // once each hold their read across work_ms, so two writes of one read
    // are certain. (Whether local-mutex does depends on nginx handing both
    // instances its buyers while fourteen other variants load them; a load
    // of local-mutex alone shows it, in tests/api/load.rs and stack.rs.)
    let none = stack.state("none").await;
    assert!(none.oversold > 0, "{none:?}: {}", cards["none"]);
    assert!(
        cards["none"]["verdict"]
            .as_str()
            .unwrap()
            .starts_with("OVERSOLD"),
        "{}",
        cards["none"]
    );
    // The lost update, explained under `none`'s numbers with its own: every
    // sale beyond the stock's drop was written over another's.
    let lost = browser
        .run("return ['none', 'lua'].map((v) => { const p = document.querySelector(`[data-variant=${v}] [data-field=lost-update]`); return [p.hidden, p.textContent]; })")
        .await;
    let dropped = none.initial - none.remaining;
    assert_eq!(
        lost,
        json!([
            [
                false,
                format!(
                    "The lost update: {} buyers were told \"sold\", but the stock dropped by only {dropped} (from {} to {}). Two buyers read the same stock, say 40; each sells a unit and writes back 39: two sales, one unit gone. {} sales were written over another buyer's.",
                    none.sold, none.initial, none.remaining, none.oversold
                )
            ],
            [true, ""]
        ]),
    );
    assert_eq!(none.sold - dropped, none.oversold, "{none:?}");
    // setnx fails fast: it leaves stock on the shelf while turning buyers away.
    assert!(
        cards["setnx"]["verdict"]
            .as_str()
            .unwrap()
            .starts_with("SAFE, unsold "),
        "{}",
        cards["setnx"]
    );
    assert_eq!(cards["lua"]["oversold"], json!("0"));
    // Under the ledger's verdict, the history checker's: `none`'s answers
    // alone convict it, `lua`'s are a stock's.
    assert_eq!(cards["lua"]["verdict"], json!("SAFE"));
    assert_eq!(cards["lua"]["history_text"], json!("history: linearizable"));
    assert_eq!(
        cards["none"]["history"],
        json!("unsafe"),
        "{}",
        cards["none"]
    );

    // A newcomer's first step, and what the knobs and the numbers mean,
    // opened by a tap (no hover tooltip: a touch screen never shows one).
    let first = browser
        .run("const s = document.getElementById('start-here'); return [s.getBoundingClientRect().height > 0, [...s.querySelectorAll('a')].map((a) => a.getAttribute('href'))]")
        .await;
    assert_eq!(
        first,
        json!([
            true,
            [
                "/lessons",
                "/step?variant=none&scenario=race",
                "/lessons",
                "/step?variant=none&scenario=race"
            ]
        ]),
    );
    for knob in ["work_ms", "lease_ms", "wait_ms"] {
        browser
            .click(&format!("button.hint[aria-controls=hint-{knob}]"))
            .await;
        let shown = browser
            .run_with(
                "const p = document.getElementById(`hint-${arguments[0]}`);
                 return [p.hidden, p.getBoundingClientRect().height > 0, p.textContent,
                   document.querySelector(`button[aria-controls=hint-${arguments[0]}]`).getAttribute('aria-expanded')]",
                json!([knob]),
            )
            .await;
        assert_eq!(shown[0], false, "{knob}: {shown}");
        assert_eq!(shown[1], true, "{knob}: {shown}");
        assert!(
            shown[2].as_str().unwrap().starts_with(&format!("{knob}: ")),
            "{knob}: {shown}"
        );
        assert_eq!(shown[3], "true", "{knob}: {shown}");
    }
    browser.click("#legend summary").await;
    let legend = browser
        .run("return [...document.querySelectorAll('#legend dd')].filter((d) => d.getBoundingClientRect().height > 0).length")
        .await;
    assert_eq!(legend, json!(5), "the five numbers of a card, explained");

    // The instances panel shows both instances, healthy, with their requests.
    let instances = browser
        .run("return [...document.querySelectorAll('#instance-list li')].map(li => [li.dataset.instance, li.dataset.healthy])")
        .await;
    assert_eq!(instances, json!([["a", "true"], ["b", "true"]]));
    browser.screenshot("dashboard.png").await;

    // A card's "Scenarios" button runs that variant's failure scenarios (on
    // a stack of the lab's own) and shows each verdict with its evidence.
    browser
        .click("[data-variant=lua] [data-action=scenarios]")
        .await;
    browser
        .wait_until("document.querySelector('[data-variant=lua] [data-field=scenarios]').dataset.state === 'done'")
        .await;
    let lab = browser
        .run("return [...document.querySelectorAll('[data-variant=lua] .scenarios .cell')].map(c => [c.dataset.scenario, c.dataset.observed, c.classList.contains('pass')])")
        .await;
    let wanted: Vec<&str> = stocklock::lab::Scenario::ALL
        .iter()
        .filter(|s| s.claim(stocklock::variants::Variant::Lua).applies())
        .map(|s| s.name())
        .collect();
    let cells = lab.as_array().unwrap();
    assert_eq!(cells.len(), wanted.len(), "{lab}");
    for cell in cells {
        assert_eq!(cell[2], json!(true), "{cell}");
        assert!(wanted.contains(&cell[0].as_str().unwrap()), "{cell}");
    }

    // 中文
    browser.click("#lang").await;
    assert_eq!(
        browser.run("return document.documentElement.lang").await,
        json!("zh")
    );
    assert_eq!(
        browser
            .run("return document.querySelector('#race-all').textContent")
            .await,
        json!("全部同时压测")
    );
    assert_eq!(
        browser
            .run("return getComputedStyle(document.querySelector('[data-variant=lua] .protection [lang=zh]')).display")
            .await,
        json!("inline")
    );
    assert!(
        browser
            .run("return document.getElementById('hint-work_ms').textContent")
            .await
            .as_str()
            .unwrap()
            .starts_with("work_ms:每个买家"),
        "the hints in Chinese"
    );
    browser.screenshot("dashboard-zh.png").await;

    browser.quit().await;
    stack.stop().await;
}
