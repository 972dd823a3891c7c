//! The few etcd v3 calls the lock needs, through etcd's JSON gateway
//! (`POST /v3/...` on every member's client URL) with the HTTP client the
//! project already has: no gRPC stack to build.
//!
//! The gateway speaks the gRPC messages as JSON: keys and values in base64,
//! 64-bit integers as strings, fields at their default value left out (a
//! watch event without `type` is a PUT). Its streaming calls (`/v3/watch`)
//! answer with one JSON message per line, as long as the request stays open.
//!
//! Every call has a bound: a member that refuses the connection, times out
//! or answers that it cannot serve (no leader, quorum lost) is skipped for
//! the next one; when none could, the call fails with
//! [`Error::EtcdUnavailable`], never hangs.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

use crate::Error;

/// How long one call may take on one member, by default.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// gRPC codes that mean "this member cannot serve now, another may":
/// DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED, UNAVAILABLE.
const TRANSIENT_CODES: [i64; 4] = [4, 8, 10, 14];

/// A handle on an etcd cluster through its members' JSON gateways.
/// Cheap to clone; clones share the member they last found working.
///
/// ```
/// use stocklock_lock::etcd::EtcdClient;
///
/// let members = vec!["http://127.0.0.1:2379/".into(), "http://127.0.0.1:22379".into()];
/// let client = EtcdClient::new(members)?; // nothing connected yet
/// assert_eq!(client.endpoints(), ["http://127.0.0.1:2379", "http://127.0.0.1:22379"]);
/// assert!(EtcdClient::new(vec![]).is_err()); // at least one member
/// # Ok::<(), stocklock_lock::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct EtcdClient {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// `http://host:port` of each member.
    endpoints: Vec<String>,
    http: reqwest::Client,
    /// The member tried first: the last one that answered.
    preferred: AtomicUsize,
    timeout: Duration,
}

impl EtcdClient {
    /// A client of the members at `endpoints` (`http://127.0.0.1:PORT`),
    /// each call bounded by [`REQUEST_TIMEOUT`] per member.
    pub fn new(endpoints: Vec<String>) -> Result<Self, Error> {
        Self::with_timeout(endpoints, REQUEST_TIMEOUT)
    }

    /// The same, with each call bounded by `timeout` per member.
    pub fn with_timeout(endpoints: Vec<String>, timeout: Duration) -> Result<Self, Error> {
        if endpoints.is_empty() {
            return Err(Error::EtcdUnavailable("no etcd endpoint configured".into()));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(timeout)
            .build()
            .map_err(|err| Error::EtcdProtocol(format!("cannot build the HTTP client: {err}")))?;
        let endpoints = endpoints
            .into_iter()
            .map(|e| e.trim_end_matches('/').to_owned())
            .collect();
        Ok(Self {
            inner: Arc::new(Inner {
                endpoints,
                http,
                preferred: AtomicUsize::new(0),
                timeout,
            }),
        })
    }

    /// The client URLs of the members this client talks to.
    pub fn endpoints(&self) -> &[String] {
        &self.inner.endpoints
    }

    /// `POST {member}{path}` with `body`, on the preferred member first and
    /// then each other once. Only for calls that are safe to send twice
    /// (every call the lock makes is: its keys are named after its lease).
    pub async fn call(&self, path: &str, body: &Value) -> Result<Value, Error> {
        let inner = &self.inner;
        let count = inner.endpoints.len();
        let first = inner.preferred.load(Ordering::Relaxed) % count;
        let mut failures = Vec::new();
        for step in 0..count {
            let index = (first + step) % count;
            let endpoint = &inner.endpoints[index];
            match self.call_one(endpoint, path, body).await {
                Ok(answer) => {
                    inner.preferred.store(index, Ordering::Relaxed);
                    return Ok(answer);
                }
                Err(Failure::Final(err)) => return Err(err),
                Err(Failure::TryAnother(why)) => failures.push(format!("{endpoint}: {why}")),
            }
        }
        Err(Error::EtcdUnavailable(failures.join("; ")))
    }

    async fn call_one(&self, endpoint: &str, path: &str, body: &Value) -> Result<Value, Failure> {
        let answer = self
            .inner
            .http
            .post(format!("{endpoint}{path}"))
            .timeout(self.inner.timeout)
            .json(body)
            .send()
            .await
            .map_err(|err| Failure::TryAnother(describe(&err)))?;
        let status = answer.status();
        let value: Value = answer
            .json()
            .await
            .map_err(|err| Failure::TryAnother(format!("HTTP {status}: {}", describe(&err))))?;
        match grpc_error(&value) {
            None if status.is_success() => Ok(value),
            None => Err(Failure::TryAnother(format!("HTTP {status}: {value}"))),
            Some((code, message)) if TRANSIENT_CODES.contains(&code) || is_transient(&message) => {
                Err(Failure::TryAnother(message))
            }
            Some((code, message)) => Err(Failure::Final(Error::EtcdRefused(format!(
                "{message} (code {code})"
            )))),
        }
    }

    /// Opens a watch of `key`'s deletions from `start_revision` on some
    /// member, bounded by `timeout` as a whole: the stream of its messages.
    pub async fn watch_deletes(
        &self,
        key: &str,
        start_revision: i64,
        timeout: Duration,
    ) -> Result<WatchStream, Error> {
        let body = json!({"create_request": {
            "key": b64(key),
            "start_revision": start_revision.to_string(),
            "filters": ["NOPUT"],
        }});
        let inner = &self.inner;
        let count = inner.endpoints.len();
        let first = inner.preferred.load(Ordering::Relaxed) % count;
        let mut failures = Vec::new();
        for step in 0..count {
            let endpoint = &inner.endpoints[(first + step) % count];
            let sent = inner
                .http
                .post(format!("{endpoint}/v3/watch"))
                .timeout(timeout)
                .json(&body)
                .send()
                .await;
            match sent {
                Ok(response) if response.status().is_success() => {
                    return Ok(WatchStream {
                        response,
                        buffer: Vec::new(),
                    });
                }
                Ok(response) => failures.push(format!("{endpoint}: HTTP {}", response.status())),
                Err(err) => failures.push(format!("{endpoint}: {}", describe(&err))),
            }
        }
        Err(Error::EtcdUnavailable(failures.join("; ")))
    }
}

enum Failure {
    /// This member could not serve; another may.
    TryAnother(String),
    /// etcd's own answer: the same from any member.
    Final(Error),
}

/// The messages of one open watch, one JSON object per line.
///
/// ```no_run
/// # async fn example(client: stocklock_lock::etcd::EtcdClient) -> Result<(), stocklock_lock::Error> {
/// let key = "locks/order-42/694d8c1e2f3a4b5c"; // a contender's key, as read at revision 1041
/// let mut watch = client.watch_deletes(key, 1042, std::time::Duration::from_secs(5)).await?;
/// loop {
///     let result = watch.next().await?; // Err: the stream broke, or the 5 s passed
///     if result["events"].as_array().is_some_and(|events| !events.is_empty()) {
///         break; // deleted (the first message only says the watch is created)
///     }
/// }
/// # Ok(())
/// # }
/// ```
pub struct WatchStream {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

impl WatchStream {
    /// The next message's `result`; `Err` when the stream broke or ended
    /// (the member died, the timeout passed): the caller looks again.
    pub async fn next(&mut self) -> Result<Value, Error> {
        loop {
            if let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                let trimmed = line.trim_ascii();
                if trimmed.is_empty() {
                    continue;
                }
                let value: Value = serde_json::from_slice(trimmed)
                    .map_err(|err| Error::EtcdProtocol(format!("watch message: {err}")))?;
                if let Some((_, message)) = grpc_error(&value) {
                    return Err(Error::EtcdUnavailable(format!("watch: {message}")));
                }
                return Ok(value.get("result").cloned().unwrap_or(Value::Null));
            }
            match self.response.chunk().await {
                Ok(Some(chunk)) => self.buffer.extend_from_slice(&chunk),
                Ok(None) => return Err(Error::EtcdUnavailable("the watch stream ended".into())),
                Err(err) => {
                    return Err(Error::EtcdUnavailable(format!("watch: {}", describe(&err))));
                }
            }
        }
    }
}

/// A gRPC error in a gateway answer: `{"error": .., "code": n, "message": ..}`.
fn grpc_error(value: &Value) -> Option<(i64, String)> {
    let error = value.get("error")?;
    let code = value.get("code").and_then(Value::as_i64).unwrap_or(2);
    let message = value
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| error.as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| error.to_string());
    Some((code, message))
}

/// etcd's "cannot serve now" messages that come with another code.
fn is_transient(message: &str) -> bool {
    [
        "no leader",
        "timed out",
        "leader changed",
        "not capable",
        "too many requests",
    ]
    .iter()
    .any(|m| message.contains(m))
}

fn describe(err: &reqwest::Error) -> String {
    if err.is_timeout() {
        "timed out".into()
    } else if err.is_connect() {
        "connection refused or failed".into()
    } else {
        err.to_string()
    }
}

/// A key (or value) as the gateway wants it: base64.
pub fn b64(text: &str) -> String {
    BASE64.encode(text)
}

/// A base64 key from an answer, as text (`None` when it is not base64 of UTF-8).
pub fn from_b64(value: &Value) -> Option<String> {
    let bytes = BASE64.decode(value.as_str()?).ok()?;
    String::from_utf8(bytes).ok()
}

/// A 64-bit integer from an answer: the gateway writes them as strings;
/// a field left out is zero (proto3's default).
pub fn int(value: &Value) -> Result<i64, Error> {
    match value {
        Value::Null => Ok(0),
        Value::String(s) => s
            .parse()
            .map_err(|_| Error::EtcdProtocol(format!("not an integer: {s:?}"))),
        Value::Number(n) => n
            .as_i64()
            .ok_or_else(|| Error::EtcdProtocol(format!("not a 64-bit integer: {n}"))),
        other => Err(Error::EtcdProtocol(format!("not an integer: {other}"))),
    }
}

/// The key just after every key that starts with `prefix` (etcd's
/// `range_end` of a prefix): its last byte plus one.
pub fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// Bytes as the gateway wants them: base64.
pub fn b64_bytes(bytes: &[u8]) -> String {
    BASE64.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_come_as_strings_or_not_at_all() {
        assert_eq!(int(&json!("42")).unwrap(), 42);
        assert_eq!(int(&json!(7)).unwrap(), 7);
        assert_eq!(int(&Value::Null).unwrap(), 0);
        assert!(int(&json!("x")).is_err());
    }

    #[test]
    fn a_prefix_ends_at_its_last_byte_plus_one() {
        assert_eq!(prefix_end("lock/a/"), b"lock/a0".to_vec());
        assert_eq!(from_b64(&json!(b64("lock/a/1f"))).unwrap(), "lock/a/1f");
    }

    #[test]
    fn grpc_errors_are_read_from_the_gateway_shape() {
        let answer = json!({"error": "etcdserver: no leader", "message": "etcdserver: no leader", "code": 14});
        assert_eq!(
            grpc_error(&answer),
            Some((14, "etcdserver: no leader".to_owned()))
        );
        assert!(grpc_error(&json!({"header": {}})).is_none());
        assert!(is_transient("etcdserver: request timed out"));
    }
}
