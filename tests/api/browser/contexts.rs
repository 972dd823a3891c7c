//! Browser contexts: windows of one Chromium that share no cookies, as
//! separate people's browsers would (a classroom's seats, each its own
//! cookie). Creating one is a browser-wide DevTools command (a page's,
//! through chromedriver, is refused), sent on Chromium's own DevTools
//! WebSocket; WebDriver then drives its window like any other.

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::Browser;

/// The browser-wide DevTools connection.
pub(crate) struct Devtools {
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    next: u64,
}

impl Devtools {
    async fn connect(debugger: &str) -> Devtools {
        let version: Value = reqwest::get(format!("http://{debugger}/json/version"))
            .await
            .expect("Chromium's DevTools endpoint")
            .json()
            .await
            .unwrap();
        let url = version["webSocketDebuggerUrl"]
            .as_str()
            .unwrap_or_else(|| panic!("no browser WebSocket: {version}"));
        let (ws, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("Chromium's DevTools WebSocket");
        Devtools { ws, next: 0 }
    }

    /// Sends `method` and returns its result (events in between skipped).
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let command = json!({"id": id, "method": method, "params": params});
        self.ws
            .send(Message::text(command.to_string()))
            .await
            .unwrap();
        while let Some(message) = self.ws.next().await {
            let Ok(Message::Text(text)) = message else {
                continue;
            };
            let answer: Value = serde_json::from_str(&text).unwrap();
            if answer["id"] == id {
                assert!(answer["error"].is_null(), "{method}: {answer}");
                return answer["result"].clone();
            }
        }
        panic!("DevTools closed before answering {method}");
    }
}

impl Browser {
    /// Opens `url` in a window of a new browser context (cookies and
    /// storage of its own); its WebDriver handle.
    pub(crate) async fn open_apart(&self, url: &str) -> String {
        let mut devtools = self.devtools.lock().await;
        if devtools.is_none() {
            *devtools = Some(Devtools::connect(&self.debugger).await);
        }
        let devtools = devtools.as_mut().unwrap();
        let context = devtools
            .call("Target.createBrowserContext", json!({}))
            .await;
        let target = devtools
            .call(
                "Target.createTarget",
                json!({"url": url, "browserContextId": context["browserContextId"]}),
            )
            .await;
        let target = target["targetId"].as_str().unwrap().to_owned();
        // chromedriver names a window by its target's id.
        let handles = self.call("GET", "/window/handles", Value::Null).await;
        (handles.as_array().unwrap().iter())
            .filter_map(Value::as_str)
            .find(|h| h.eq_ignore_ascii_case(&target))
            .unwrap_or_else(|| panic!("no window for target {target}: {handles}"))
            .to_owned()
    }

    /// Makes window `handle` the one the next commands act on.
    pub(crate) async fn switch_to(&self, handle: &str) {
        self.call("POST", "/window", json!({ "handle": handle }))
            .await;
    }

    /// The current window's handle.
    pub(crate) async fn window(&self) -> String {
        let handle = self.call("GET", "/window", Value::Null).await;
        handle.as_str().unwrap().to_owned()
    }
}
