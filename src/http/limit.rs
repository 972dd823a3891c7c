//! A per-client rate limit on the public routes that do work (deduct,
//! timeline and its export, orders), so one student in a classroom cannot
//! keep an instance or Redis busy for the thirty others.
//!
//! Who the client is: the TCP peer, unless the peer is this machine's own
//! nginx (exactly 127.0.0.1 or ::1), whose `X-Real-IP` (set from
//! `$remote_addr`, overwriting whatever the client sent) is then believed.
//! A header from any other peer is ignored, so nobody can forge their way
//! to another budget. Never limited: clients at exactly 127.0.0.1 or ::1
//! (the project's own `load`, `bench`, `lab`, the dashboard's runs and the
//! tests all send from there; the rest of 127/8 is limited like a remote
//! client, which is what lets a test play one), requests with the admin
//! token, and in-process callers with no socket at all.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::Clock;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::web::AdminToken;
use crate::wire::ErrorBody;

/// The default budget: a classroom behind one NAT shares one address, and
/// thirty people clicking stay far below this.
pub const DEFAULT_RATE: &str = "100/s";

/// `serve --help`'s text of `--rate-limit`.
pub const HELP: &str = "Each client's budget on the public routes that do work (deduct, \
timeline and its export, orders), counted by each instance on its own: N/s, N/min or N/h (a \
burst of N, refilled evenly), or off. Past it: 429 rate_limited with Retry-After. The \
client is the TCP peer, or nginx's X-Real-IP when the peer is exactly 127.0.0.1 or ::1 \
(nginx on this machine); a header from any other peer is ignored. Never limited: clients \
at exactly 127.0.0.1 or ::1 (load, bench, lab, the dashboard's runs; the rest of 127/8 is \
limited like any remote client) and requests with the admin token.";

/// Past this many remembered clients, those whose budget is full again are
/// forgotten, so rotating addresses cannot grow the table without bound.
const REMEMBERED_CLIENTS: usize = 10_000;

/// The header nginx sets from the address it was connected from.
const REAL_IP: &str = "x-real-ip";

/// How many requests one client may make: `count` per `per`, all of them
/// at once if it was quiet that long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    pub count: NonZeroU32,
    pub per: Per,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Per {
    Second,
    Minute,
    Hour,
}

/// A rate or none, as `serve --rate-limit` takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget(pub Option<Rate>);

/// Parses `100/s`, `30/min` (also `/m`), `5/h`, or `off` (also `0`): no limit.
pub fn parse_budget(text: &str) -> Result<Budget, String> {
    parse_rate(text).map(Budget)
}

fn parse_rate(text: &str) -> Result<Option<Rate>, String> {
    let text = text.trim();
    if text == "off" || text == "0" {
        return Ok(None);
    }
    let usage = || format!("{text:?}: expected N/s, N/min, N/h or off (e.g. {DEFAULT_RATE})");
    let (count, per) = text.split_once('/').ok_or_else(usage)?;
    let per = match per {
        "s" | "sec" => Per::Second,
        "m" | "min" => Per::Minute,
        "h" => Per::Hour,
        _ => return Err(usage()),
    };
    let count = count.parse::<u32>().map_err(|_| usage())?;
    match NonZeroU32::new(count) {
        Some(count) => Ok(Some(Rate { count, per })),
        None => Ok(None),
    }
}

/// The limiter of one instance (each instance counts on its own: behind
/// nginx's round robin a client gets about N times the budget). Cheap to clone.
#[derive(Clone)]
pub struct RateLimit {
    limiter: Option<Arc<DefaultKeyedRateLimiter<IpAddr>>>,
    admin: AdminToken,
}

impl RateLimit {
    /// `None`: no limit.
    pub fn new(rate: Option<Rate>, admin: AdminToken) -> Self {
        let limiter = rate.map(|rate| {
            let quota = match rate.per {
                Per::Second => Quota::per_second(rate.count),
                Per::Minute => Quota::per_minute(rate.count),
                Per::Hour => Quota::per_hour(rate.count),
            };
            Arc::new(RateLimiter::keyed(quota))
        });
        Self { limiter, admin }
    }

    /// Whether there is a limit at all.
    pub fn is_on(&self) -> bool {
        self.limiter.is_some()
    }

    /// How long `peer`'s client must wait, or `None` when it may go on.
    fn wait_for(&self, peer: IpAddr, headers: &HeaderMap) -> Option<Duration> {
        let limiter = self.limiter.as_ref()?;
        let client = client_of(peer, headers);
        if is_local(client) || self.admin.authorize(headers).is_ok() {
            return None;
        }
        if limiter.len() > REMEMBERED_CLIENTS {
            limiter.retain_recent();
        }
        limiter
            .check_key(&client)
            .err()
            .map(|not_until| not_until.wait_time_from(limiter.clock().now()))
    }
}

/// Exactly this machine's usual loopback addresses: the rest of 127/8 is
/// not exempt.
fn is_local(ip: IpAddr) -> bool {
    let ip = ip.to_canonical();
    ip == IpAddr::V4(Ipv4Addr::LOCALHOST) || ip == IpAddr::V6(Ipv6Addr::LOCALHOST)
}

/// The client behind `peer`: nginx's `X-Real-IP` when the peer is nginx on
/// this machine, the peer itself otherwise.
fn client_of(peer: IpAddr, headers: &HeaderMap) -> IpAddr {
    let forwarded = || {
        headers
            .get(REAL_IP)?
            .to_str()
            .ok()?
            .trim()
            .parse::<IpAddr>()
            .ok()
    };
    let client = if is_local(peer) {
        forwarded().unwrap_or(peer)
    } else {
        peer
    };
    client.to_canonical()
}

/// The middleware: lets the request through or answers 429 `rate_limited`
/// with `Retry-After`.
pub async fn enforce(State(limit): State<RateLimit>, request: Request, next: Next) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip());
    let wait = peer.and_then(|peer| limit.wait_for(peer, request.headers()));
    match wait {
        None => next.run(request).await,
        Some(wait) => rate_limited(wait),
    }
}

fn rate_limited(wait: Duration) -> Response {
    // Whole seconds, rounded up: "0" would invite an immediate retry.
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let seconds = seconds.max(1);
    let body = ErrorBody {
        error: "rate_limited".to_owned(),
        detail: format!(
            "too many requests from your address to this instance; retry in {seconds} s \
             (the limit is serve --rate-limit)"
        ),
        valid: None,
    };
    let mut response = (StatusCode::TOO_MANY_REQUESTS, Json(body)).into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(real_ip: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(REAL_IP, HeaderValue::from_str(real_ip).unwrap());
        headers
    }

    #[test]
    fn rates_parse_and_bad_ones_say_the_format() {
        let rate = parse_rate("100/s").unwrap().unwrap();
        assert_eq!((rate.count.get(), rate.per), (100, Per::Second));
        let rate = parse_rate("30/min").unwrap().unwrap();
        assert_eq!((rate.count.get(), rate.per), (30, Per::Minute));
        assert_eq!(parse_rate("off").unwrap(), None);
        assert_eq!(parse_rate("0/s").unwrap(), None);
        for bad in ["100", "x/s", "10/d", "-1/s", ""] {
            let err = parse_rate(bad).unwrap_err();
            assert!(err.contains("N/s"), "{bad}: {err}");
        }
    }

    #[test]
    fn only_exact_loopback_is_local() {
        assert!(is_local("127.0.0.1".parse().unwrap()));
        assert!(is_local("::1".parse().unwrap()));
        assert!(is_local("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!is_local("127.0.0.2".parse().unwrap()));
        assert!(!is_local("10.0.0.1".parse().unwrap()));
    }

    #[test]
    fn the_header_counts_only_from_local_nginx() {
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        let remote: IpAddr = "127.0.0.2".parse().unwrap();
        assert_eq!(
            client_of(local, &headers("10.1.2.3")),
            "10.1.2.3".parse::<IpAddr>().unwrap()
        );
        assert_eq!(client_of(remote, &headers("127.0.0.1")), remote);
        assert_eq!(client_of(local, &headers("garbage")), local);
        assert_eq!(client_of(local, &HeaderMap::new()), local);
    }
}
