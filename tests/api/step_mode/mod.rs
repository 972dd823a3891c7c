//! Step mode in a real browser: the learner picks, by keys and clicks,
//! which buyer moves and which fault strikes, on a live stack, until the
//! ledger shows the cell's failure; and no order of clicks breaks `lua`.

use std::time::Duration;

use serde_json::{Value, json};
use stocklock::check;
use stocklock::variants::{Scenario, Variant};

use crate::browser::Browser;
use crate::helpers::{Stack, within};

mod levels;
mod page;

/// Reads what the page shows: the run, its version, whether it is over,
/// each lane's state and gate, and the verdict.
const SHOWN: &str = "const main = document.getElementById('step');
     const lanes = [...document.querySelectorAll('#lanes .lane')].map((l) => ({
       buyer: l.dataset.buyer, state: l.dataset.state, gate: l.dataset.gate,
       key: (l.querySelector('button[data-key]') || {dataset: {}}).dataset.key || null }));
     const verdict = document.getElementById('verdict');
     return {run: main.dataset.run || null, sku: main.dataset.sku || null,
       version: Number(main.dataset.version || 0), over: main.dataset.over === 'true', lanes,
       steps: Number(main.dataset.steps || 0),
       progress: document.getElementById('shortest-progress').textContent,
       violation: verdict.dataset.violation || null, verdict: verdict.hidden ? null : verdict.innerText,
       message: document.getElementById('message').textContent,
       stores: Object.fromEntries([...document.querySelectorAll('#state [data-field]')].map((d) => [d.dataset.field, d.textContent]))};";

pub(crate) struct Page<'a> {
    pub(crate) browser: &'a Browser,
}

/// Opens step mode on `none · race` as the teacher does (the admin token
/// in the URL), once its picker is filled.
async fn open(browser: &Browser, stack: &Stack) {
    browser
        .goto(&format!(
            "{}/step?variant=none&scenario=race#token={}",
            stack.url, stack.token
        ))
        .await;
    browser
        .wait_until("document.querySelectorAll('#cell option').length > 20")
        .await;
}

impl Page<'_> {
    /// Plays the checker's shortest way of the picked cell by itself, at
    /// the fastest speed, from a fresh run to its end; the page then.
    pub(crate) async fn shortest_by_itself(&self) -> Value {
        self.browser
            .run("document.getElementById('auto').checked = true; document.getElementById('speed').value = '150'; return true")
            .await;
        let before = self.shown().await["run"].clone();
        self.browser.click("#shortest").await;
        self.browser
            .wait_until(&format!("document.getElementById('step').dataset.run !== {before} && document.getElementById('step').dataset.over === 'true'"))
            .await;
        self.shown().await
    }

    pub(crate) async fn shown(&self) -> Value {
        self.browser.run(SHOWN).await
    }

    /// Picks the cell and the number of buyers, starts a run with the `n`
    /// key, and waits for its first view.
    pub(crate) async fn start(&self, variant: Variant, scenario: Scenario, buyers: u8) -> Value {
        let before = self.shown().await["run"].clone();
        self.pick(variant, scenario, buyers).await;
        self.browser.press("n").await;
        self.browser
            .wait_until(&format!(
                "document.getElementById('step').dataset.run && document.getElementById('step').dataset.run !== {before} && document.querySelectorAll('#lanes .lane').length === {buyers}"
            ))
            .await;
        self.shown().await
    }

    /// Picks a cell and a number of buyers in the form, starting nothing.
    pub(crate) async fn pick(&self, variant: Variant, scenario: Scenario, buyers: u8) {
        self.browser
            .run_with(
                "document.getElementById('cell').value = arguments[0];
                 document.getElementById('buyers').value = String(arguments[1]); return true",
                json!([format!("{variant}/{scenario}"), buyers]),
            )
            .await;
    }

    /// Waits for the view after the step a key or a click just sent.
    pub(crate) async fn stepped(&self, version: i64) -> Value {
        self.browser
            .wait_until(&format!(
                "Number(document.getElementById('step').dataset.version) > {version} || document.getElementById('message').textContent.startsWith('refused')"
            ))
            .await;
        let shown = self.shown().await;
        assert!(
            !shown["message"]
                .as_str()
                .unwrap_or("")
                .starts_with("refused"),
            "{shown}"
        );
        shown
    }

    /// Presses buyer `buyer`'s number key: it goes on to its next gate.
    pub(crate) async fn press_buyer(&self, buyer: &str) -> Value {
        let shown = self.shown().await;
        let lane = lane(&shown, buyer);
        let key = lane["key"]
            .as_str()
            .unwrap_or_else(|| panic!("{buyer} has no step now: {shown}"))
            .to_owned();
        self.browser.press(&key).await;
        self.stepped(shown["version"].as_i64().unwrap()).await
    }

    /// Lets `buyer` go until it waits at `gate`.
    pub(crate) async fn advance(&self, buyer: &str, gate: &str) -> Value {
        loop {
            let shown = self.shown().await;
            let lane = lane(&shown, buyer);
            if lane["state"] == "waiting" && lane["gate"] == gate {
                return shown;
            }
            assert_eq!(
                lane["state"], "waiting",
                "{buyer} never waited at {gate}: {shown}"
            );
            self.press_buyer(buyer).await;
        }
    }

    /// Clicks the fault `kind` (of `buyer`, when it names one).
    pub(crate) async fn strike(&self, kind: &str, buyer: &str) -> Value {
        let version = self.shown().await["version"].as_i64().unwrap();
        self.browser
            .click(&format!(
                "#faults button[data-fault={kind}][data-buyer='{buyer}']"
            ))
            .await;
        self.stepped(version).await
    }

    /// Lets the first buyer with a step go, key after key, until the run
    /// is over.
    pub(crate) async fn finish(&self) -> Value {
        loop {
            let shown = self.shown().await;
            if shown["over"] == true {
                return shown;
            }
            let next = (shown["lanes"].as_array().unwrap().iter())
                .find(|l| l["key"].is_string())
                .unwrap_or_else(|| panic!("nobody can move and the run is not over: {shown}"));
            self.press_buyer(next["buyer"].as_str().unwrap()).await;
        }
    }
}

pub(crate) fn lane<'v>(shown: &'v Value, buyer: &str) -> &'v Value {
    (shown["lanes"].as_array().unwrap().iter())
        .find(|l| l["buyer"] == buyer)
        .unwrap_or_else(|| panic!("no lane {buyer}: {shown}"))
}

/// The page's verdict is a violation, and it names the checker's steps
/// and the history checker's verdict.
fn broke(shown: &Value, variant: Variant, scenario: Scenario) {
    assert_eq!(shown["over"], true, "{shown}");
    assert_eq!(shown["violation"], "true", "{variant}/{scenario}: {shown}");
    let model = check::check(variant, scenario).expect("a model");
    assert!(model.broken.is_some(), "{variant}/{scenario}");
    let said = shown["verdict"].as_str().unwrap();
    assert!(
        said.contains(&format!("in {} steps", model.trace.len())),
        "{variant}/{scenario}: the checker's {} steps not named: {said}",
        model.trace.len()
    );
    assert!(
        said.contains("The history checker, from what the buyers were told alone: "),
        "{variant}/{scenario}: {said}"
    );
}

#[tokio::test]
async fn a_learner_breaks_the_broken_cells_by_hand_and_no_order_of_clicks_breaks_lua() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let stack = Stack::start(3, None).await;
    open(&browser, &stack).await;
    let page = Page { browser: &browser };
    within(Duration::from_secs(600), async {
        // setnx: A's SETNX, then A dies before its EXPIRE; nobody sells.
        let (variant, scenario) = (Variant::Setnx, Scenario::CrashAfterAcquire);
        page.start(variant, scenario, 3).await;
        page.advance("A", "after_setnx").await;
        page.strike("Crash", "A").await;
        let shown = page.finish().await;
        broke(&shown, variant, scenario);
        // The learner's own run, beside the checker's.
        let said = shown["verdict"].as_str().unwrap();
        assert!(said.contains("; your run took "), "{said}");
        // As the run left the stores (once it is over, the crashed buyer
        // is let go like every other and sells).
        let stores = &shown["stores"];
        assert!(
            stores["ttl"] == "no TTL: it never expires" && stores["sold"] == "0",
            "a lock with no TTL, nothing sold: {shown}"
        );

        // token: A holds the lock and has read; its lease runs out; B
        // takes the lock and reads the same stock; both write.
        let (variant, scenario) = (Variant::Token, Scenario::SlowBusiness);
        page.start(variant, scenario, 3).await;
        page.advance("A", "before_write").await;
        page.strike("Expire", "").await;
        page.advance("B", "before_write").await;
        let shown = page.finish().await;
        broke(&shown, variant, scenario);
        let state = stack.state(shown["sku"].as_str().unwrap()).await;
        assert!(state.oversold > 0, "token oversold: {state:?}");
        // One unit told sold to two buyers: the history alone convicts it.
        let said = shown["verdict"].as_str().unwrap();
        assert!(said.contains("alone: unsafe"), "{said}");

        // none: every buyer reads before anyone writes.
        let (variant, scenario) = (Variant::None, Scenario::Race);
        page.start(variant, scenario, 3).await;
        for buyer in ["A", "B", "C"] {
            page.advance(buyer, "before_write").await;
        }
        let shown = page.finish().await;
        broke(&shown, variant, scenario);
        let state = stack.state(shown["sku"].as_str().unwrap()).await;
        assert!(state.oversold > 0, "none oversold: {state:?}");

        // lua, two buyers: every order of their steps, none breaks it.
        let (variant, scenario) = (Variant::Lua, Scenario::Race);
        let mut orders = 0;
        for order in interleavings(&["A", "A", "B", "B"]) {
            page.start(variant, scenario, 2).await;
            for buyer in &order {
                page.press_buyer(buyer).await;
            }
            let shown = page.shown().await;
            assert_eq!(shown["over"], true, "{order:?}: {shown}");
            assert_eq!(shown["violation"], "false", "{order:?}: {shown}");
            let state = stack.state(shown["sku"].as_str().unwrap()).await;
            assert_eq!(
                (state.sold, state.oversold, state.remaining),
                (2, 0, 0),
                "{order:?}"
            );
            orders += 1;
        }
        assert_eq!(orders, 6, "every order of two steps each");

        // The checker's shortest way, a press of `s` per step, from the
        // start of a run.
        let (variant, scenario) = (Variant::Setnx, Scenario::CrashAfterAcquire);
        page.start(variant, scenario, 3).await;
        let mut presses = 0;
        let mut progress = String::new();
        loop {
            let shown = page.shown().await;
            if shown["over"] == true && presses > 0 {
                broke(&shown, variant, scenario);
                break;
            }
            assert!(presses < 20, "the shortest way never ended: {shown}");
            let steps = shown["steps"].as_i64().unwrap_or(0);
            browser.press("s").await;
            browser
                .wait_until(&format!(
                    "Number(document.getElementById('step').dataset.steps) > {steps}"
                ))
                .await;
            presses += 1;
            let now = page.shown().await;
            if let Some(line) = now["progress"].as_str().filter(|l| !l.is_empty()) {
                progress = line.to_owned();
            }
        }
        let steps = check::check(variant, scenario).unwrap().trace.len();
        eprintln!("setnx's shortest way: {presses} presses, last {progress:?}, the checker's {steps} steps");
        assert!(
            presses > 1
                && progress
                    == format!("the checker's shortest way: step {presses} of {presses}"),
            "a press per step of the plan, the last one's said once the run is over: {progress:?} after {presses} presses"
        );

        // Played by itself: token's lease runs out under its holder.
        let (variant, scenario) = (Variant::Token, Scenario::SlowBusiness);
        page.pick(variant, scenario, 3).await;
        let shown = page.shortest_by_itself().await;
        broke(&shown, variant, scenario);
        // The checker played this run: the page does not say "you took".
        let said = shown["verdict"].as_str().unwrap();
        assert!(
            said.contains("; its way, played on this stack, took ") && !said.contains("your run"),
            "{said}"
        );

        // Each lesson step's "try it by hand" opens step mode on its cell,
        // playable, with the lesson's goal stated; a card's link opens it
        // on its variant.
        for lesson in &stocklock::lessons::STEPS {
            browser.goto(&format!("{}/lessons", stack.url)).await;
            let href = browser
                .run_with(
                    "return document.querySelector(`[data-step=${arguments[0]}] [data-field=by-hand]`).getAttribute('href')",
                    json!([lesson.id]),
                )
                .await;
            assert_eq!(href, format!("/step?lesson={}", lesson.id));
            browser.goto(&format!("{}{}", stack.url, href.as_str().unwrap())).await;
            browser.wait_until("document.getElementById('cell') !== null").await;
            let opened = browser
                .run("const c = document.getElementById('cell'); return [c.value, c.selectedOptions[0].disabled, document.getElementById('goal').textContent]")
                .await;
            assert_eq!(opened[0], format!("{}/{}", lesson.variant, lesson.scenario), "{}", lesson.id);
            assert_eq!(opened[1], false, "{}: step mode does not play its cell", lesson.id);
            assert!(
                opened[2].as_str().unwrap().contains(lesson.goal),
                "{}: the goal is not stated: {opened}",
                lesson.id
            );
        }
        browser.goto(&format!("{}/", stack.url)).await;
        let href = browser
            .run("return document.querySelector('[data-variant=token] [data-field=step-link]').getAttribute('href')")
            .await;
        browser.goto(&format!("{}{}", stack.url, href.as_str().unwrap())).await;
        browser.wait_until("document.getElementById('cell') !== null").await;
        let opened = browser
            .run("const c = document.getElementById('cell'); return [c.value.split('/')[0], c.selectedOptions[0].disabled]")
            .await;
        assert_eq!(opened, json!(["token", false]), "the card's link");

        // "Is there any way?": an exploration on this stack finds one for
        // none, and none for lua.
        browser
            .goto(&format!("{}/step?variant=none&scenario=race", stack.url))
            .await;
        browser.wait_until("document.getElementById('cell') !== null").await;
        for (variant, found) in [(Variant::None, true), (Variant::Lua, false)] {
            page.pick(variant, Scenario::Race, 3).await;
            browser
                .run("delete document.getElementById('anyway-result').dataset.state; return true")
                .await;
            browser.press("a").await;
            browser
                .wait_until("['done', 'failed'].includes(document.getElementById('anyway-result').dataset.state)")
                .await;
            let said = browser
                .run("const r = document.getElementById('anyway-result'); return [r.dataset.state, r.dataset.found, r.textContent]")
                .await;
            assert_eq!(said[0], "done", "{variant}: {said}");
            assert_eq!(said[1], found.to_string(), "{variant}: {said}");
        }
    })
    .await;
    browser.quit().await;
}

/// Every distinct order of `steps`.
fn interleavings(steps: &[&'static str]) -> Vec<Vec<&'static str>> {
    if steps.is_empty() {
        return vec![Vec::new()];
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut all = Vec::new();
    for (i, first) in steps.iter().enumerate() {
        if !seen.insert(*first) {
            continue;
        }
        let mut rest = steps.to_vec();
        rest.remove(i);
        for mut tail in interleavings(&rest) {
            tail.insert(0, first);
            all.push(tail);
        }
    }
    all
}
