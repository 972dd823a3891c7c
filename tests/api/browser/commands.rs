//! The WebDriver commands the tests give a browser: open a page, click,
//! press a key, run a script, wait for the page, race every variant from
//! its form, resize, take a screenshot, quit.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::Browser;

impl Browser {
    pub(super) async fn call(&self, method: &str, path: &str, body: Value) -> Value {
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

    /// The console's messages since last asked (each `{level, message}`;
    /// a failed request is a `SEVERE` one naming its URL and status).
    pub(crate) async fn console(&self) -> Vec<Value> {
        let logs = self
            .call("POST", "/se/log", json!({ "type": "browser" }))
            .await;
        logs.as_array().cloned().unwrap_or_default()
    }

    /// Returns once the page has requested `path` `times` times (from its
    /// resource timings, looked at every 100 ms: a poll's requests change
    /// nothing a page event would announce).
    pub(crate) async fn polls(&self, path: &str, times: usize) {
        let script = "const [path, times, done] = arguments;
            const count = () => performance.getEntriesByType('resource')
                .filter((e) => new URL(e.name).pathname === path).length;
            const look = () => (count() >= times ? done(count()) : setTimeout(look, 100));
            look();";
        self.call(
            "POST",
            "/execute/async",
            json!({"script": script, "args": [path, times]}),
        )
        .await;
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

    /// Runs `script` with `args` and waits until it calls its last
    /// argument (`done`) with its value.
    pub(crate) async fn run_async(&self, script: &str, args: Value) -> Value {
        self.call(
            "POST",
            "/execute/async",
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
        // Pressed, the button waits for the run: no second press (the
        // server refuses a second run), and the box says it started.
        let pressed = self
            .run("return [document.querySelector('#race-all').disabled, document.querySelector('#run-text').textContent]")
            .await;
        assert_eq!(pressed[0], true, "the button stayed enabled: {pressed}");
        assert!(
            pressed[1].as_str().is_some_and(|text| !text.is_empty()),
            "nothing says the run started: {pressed}"
        );
        self.wait_until("document.querySelector('#run').dataset.runState === 'done' && document.querySelector('[data-variant=lua] [data-field=verdict]').textContent === 'SAFE'")
            .await;
        assert_eq!(
            self.run("return document.querySelector('#race-all').disabled")
                .await,
            false,
            "the run is over: the button is back"
        );
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
