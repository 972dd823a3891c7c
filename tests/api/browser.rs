//! The dashboard in a real browser: headless Chromium driven over WebDriver
//! (Debian's chromium and chromium-driver), through nginx, on a real stack.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use stocklock::os::{find_program, free_port};
use stocklock::up::process::{wait_ready, watch_output};
use stocklock::variants::Variant;
use tokio::process::{Child, Command};

use crate::helpers::Stack;

/// Buyers per variant when a test races all of them from the page: more
/// than the stock (50), so every safe variant sells out and turns some away.
pub(crate) const RACE_REQUESTS: u32 = 100;

/// A chromedriver child and one browser session.
pub(crate) struct Browser {
    driver: Child,
    /// chromedriver's process group: Chromium's processes are in it too.
    group: nix::unistd::Pid,
    http: reqwest::Client,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// `None` (and a visible note; a failure under `CI=true`) when
    /// Chromium or its driver is missing.
    pub(crate) async fn start() -> Option<Browser> {
        let (Some(chromium), Some(chromedriver)) =
            (find_program("chromium"), find_program("chromedriver"))
        else {
            crate::helpers::missing_tool(
                "browser test: chromium or chromedriver is not installed (apt-get install chromium chromium-driver)",
            );
            return None;
        };
        let port = free_port().unwrap();
        let mut driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            // Its own group, so that a failed test takes Chromium down too.
            .process_group(0)
            .spawn()
            .expect("run chromedriver");
        let group = nix::unistd::Pid::from_raw(driver.id().expect("chromedriver's pid") as i32);
        let stdout = driver.stdout.take().unwrap();
        let (output, ready) = watch_output(stdout, Some("started successfully"), None);
        wait_ready(
            &mut driver,
            ready,
            &output,
            "chromedriver",
            Duration::from_secs(20),
        )
        .await
        .unwrap();

        let profile = tempfile::tempdir().unwrap();
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-quic", "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--window-size=1600,1250",
                    format!("--user-data-dir={}", profile.path().display()),
                ]
            }
        }}});
        let answer: Value = http
            .post(format!("{base}/session"))
            .json(&capabilities)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let session = answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {answer}"))
            .to_owned();
        let browser = Browser {
            driver,
            group,
            http,
            session: format!("{base}/session/{session}"),
            _profile: profile,
        };
        browser
            .call("POST", "/timeouts", json!({"script": 120_000}))
            .await;
        Some(browser)
    }

    async fn call(&self, method: &str, path: &str, body: Value) -> Value {
        self.try_call(method, path, body)
            .await
            .unwrap_or_else(|error| panic!("WebDriver {method} {path}: {error}"))
    }

    /// The command's value, or WebDriver's error object.
    async fn try_call(&self, method: &str, path: &str, body: Value) -> Result<Value, Value> {
        let url = format!("{}{path}", self.session);
        let request = match method {
            "GET" => self.http.get(&url),
            "DELETE" => self.http.delete(&url),
            _ => self.http.post(&url).json(&body),
        };
        let answer: Value = request.send().await.unwrap().json().await.unwrap();
        if answer["value"]["error"].is_string() {
            return Err(answer["value"].clone());
        }
        Ok(answer["value"].clone())
    }

    pub(crate) async fn goto(&self, url: &str) {
        self.call("POST", "/url", json!({ "url": url })).await;
    }

    pub(crate) async fn click(&self, css: &str) {
        let element = self
            .call(
                "POST",
                "/element",
                json!({"using": "css selector", "value": css}),
            )
            .await;
        let id = element
            .as_object()
            .unwrap()
            .values()
            .next()
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned();
        self.call("POST", &format!("/element/{id}/click"), json!({}))
            .await;
    }

    /// Presses and releases `key` on the keyboard (to whatever has the
    /// focus; the page's key handlers listen on the document).
    pub(crate) async fn press(&self, key: &str) {
        let strokes = json!([{"type": "keyDown", "value": key}, {"type": "keyUp", "value": key}]);
        let actions = json!({"actions": [{"type": "key", "id": "keyboard", "actions": strokes}]});
        self.call("POST", "/actions", actions).await;
    }

    pub(crate) async fn run(&self, script: &str) -> Value {
        self.run_with(script, json!([])).await
    }

    /// Runs `script` with `args` (its `arguments`).
    pub(crate) async fn run_with(&self, script: &str, args: Value) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            json!({"script": script, "args": args}),
        )
        .await
    }

    /// Runs `condition` (a JS expression) whenever the page's DOM changes,
    /// until it is true: an event, not a poll.
    pub(crate) async fn wait_until(&self, condition: &str) {
        let script = format!(
            "const done = arguments[arguments.length - 1];
             const check = () => {{ try {{ return {condition}; }} catch (e) {{ return false; }} }};
             if (check()) return done(true);
             const observer = new MutationObserver(() => {{ if (check()) {{ observer.disconnect(); done(true); }} }});
             observer.observe(document.body, {{subtree: true, childList: true, attributes: true, characterData: true}});"
        );
        let started = std::time::Instant::now();
        let answer = self
            .try_call(
                "POST",
                "/execute/async",
                json!({"script": script, "args": []}),
            )
            .await;
        // A timeout names what was awaited, and what the page showed then.
        let answer = match answer {
            Ok(answer) => answer,
            Err(error) => panic!(
                "waited {:.1} s for `{condition}`: {}; the page then read: {}",
                started.elapsed().as_secs_f64(),
                error["error"],
                self.page_text().await
            ),
        };
        assert_eq!(answer, json!(true), "{condition}");
        eprintln!(
            "[browser] waited {:.1} s for `{condition}`",
            started.elapsed().as_secs_f64()
        );
    }

    /// Races every variant from the page's form, `requests` buyers each
    /// (the form's other fields as they are), and waits for the run's
    /// verdicts. Fewer buyers than the form's default keep the slowest
    /// variant (redlock: every buyer, sold or not, takes the lock on five
    /// nodes in turn) from stretching the run past the browser's timeout
    /// on a loaded machine.
    pub(crate) async fn race_all(&self, requests: u32) {
        self.run_with(
            "document.querySelector('#load-form').elements.requests.value = String(arguments[0]); return true",
            json!([requests]),
        )
        .await;
        self.click("#race-all").await;
        self.wait_until("document.querySelector('#run').dataset.runState === 'done' && document.querySelector('[data-variant=lua] [data-field=verdict]').textContent === 'SAFE'")
            .await;
    }

    /// The start of the page's visible text, for a failure's message.
    async fn page_text(&self) -> String {
        let script = json!({"script": "return document.body.innerText.slice(0, 2000)", "args": []});
        match self.try_call("POST", "/execute/sync", script).await {
            Ok(text) => text.as_str().unwrap_or_default().to_owned(),
            Err(error) => format!("(unreadable: {error})"),
        }
    }

    /// Sets the window to `width`×`height` and the page's viewport to
    /// exactly that many CSS pixels, with a phone's behaviour (the meta
    /// viewport applies, scrollbars overlay the page) when `mobile`.
    pub(crate) async fn resize(&self, width: u32, height: u32, mobile: bool) {
        self.call(
            "POST",
            "/window/rect",
            json!({"width": width, "height": height}),
        )
        .await;
        let metrics =
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile});
        self.call(
            "POST",
            "/goog/cdp/execute",
            json!({"cmd": "Emulation.setDeviceMetricsOverride", "params": metrics}),
        )
        .await;
    }

    pub(crate) async fn screenshot(&self, name: &str) -> PathBuf {
        use base64_decode::decode;
        let png = self.call("GET", "/screenshot", Value::Null).await;
        let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
        std::fs::write(&path, decode(png.as_str().unwrap())).unwrap();
        eprintln!("screenshot: {}", path.display());
        path
    }

    pub(crate) async fn quit(mut self) {
        let _ = self.http.delete(&self.session).send().await;
        let _ = self.driver.kill().await;
    }
}

impl Drop for Browser {
    /// A test that panicked never called [`Browser::quit`]: killing
    /// chromedriver alone would leave Chromium running, orphaned.
    fn drop(&mut self) {
        let _ = nix::sys::signal::killpg(self.group, nix::sys::signal::Signal::SIGKILL);
    }
}

/// Base64 without a crate: WebDriver screenshots are standard base64.
mod base64_decode {
    pub(super) fn decode(text: &str) -> Vec<u8> {
        let value = |c: u8| match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        };
        let bytes: Vec<u8> = text
            .bytes()
            .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
            .collect();
        let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
        for chunk in bytes.chunks(4) {
            let v: Vec<u32> = chunk.iter().map(|c| u32::from(value(*c))).collect();
            let n = v
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, x)| n | (x << (18 - 6 * i)));
            out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
        }
        out
    }
}

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
    browser.screenshot("dashboard-zh.png").await;

    browser.quit().await;
    stack.stop().await;
}
