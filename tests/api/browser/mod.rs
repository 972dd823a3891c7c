//! The dashboard in a real browser: headless Chromium driven over WebDriver
//! (Debian's chromium and chromium-driver), through nginx, on a real stack.
//!
//! This file: the browser, started and killed; `commands.rs`: what the
//! tests ask of it; `race.rs`: the dashboard's race of every variant.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use stocklock::os::{find_program, free_port};
use stocklock::up::process::{wait_ready, watch_output};
use tokio::process::{Child, Command};

mod chinese;
mod commands;
mod contexts;
mod pages;
mod race;

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
    /// Chromium's own DevTools address (`host:port`), and the browser-wide
    /// connection to it once a test opened one ([`Browser::open_apart`]):
    /// the browser contexts it creates live as long as it does.
    debugger: String,
    devtools: tokio::sync::Mutex<Option<contexts::Devtools>>,
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
            // The console's messages, for the tests that read them.
            "goog:loggingPrefs": {"browser": "ALL"},
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
        let debugger = answer["value"]["capabilities"]["goog:chromeOptions"]["debuggerAddress"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let browser = Browser {
            driver,
            group,
            http,
            session: format!("{base}/session/{session}"),
            debugger,
            devtools: tokio::sync::Mutex::new(None),
            _profile: profile,
        };
        browser
            .call("POST", "/timeouts", json!({"script": 120_000}))
            .await;
        Some(browser)
    }
}

impl Drop for Browser {
    /// A test that panicked never called [`Browser::quit`]: killing
    /// chromedriver alone would leave Chromium running, orphaned.
    fn drop(&mut self) {
        let _ = nix::sys::signal::killpg(self.group, nix::sys::signal::Signal::SIGKILL);
    }
}
