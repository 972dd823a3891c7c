//! A whole `/deductStock` request: its SKU, its fault knobs, its
//! idempotency key and the schedule it is a buyer of, parsed from the query
//! string's pairs.

use std::fmt;
use std::time::Duration;

use super::{
    InputError, MAX_LEASE_MS, MAX_WAIT_MS, MAX_WORK_MS, MIN_LEASE_MS, Sku, parse_ms,
    parse_request_id, quoted,
};

/// The fault knobs of one request, as the user gave them. Variants fill in
/// their own defaults for what is `None`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Knobs {
    /// Simulated business time inside the critical section.
    pub work: Duration,
    /// The lock's lease.
    pub lease: Option<Duration>,
    /// How long to wait for the lock; zero fails fast with `busy`.
    pub wait: Option<Duration>,
    /// Answer from the instance's sold-out mark ([`crate::marks`]) once the
    /// SKU is known sold out; `None`: the variant's default (on for the
    /// scripted variants, off for the lock variants).
    pub sold_out_mark: Option<bool>,
    /// After taking its lock on the main Redis (`token`, `watchdog`,
    /// `fenced`), `WAIT` for this many replicas to acknowledge it, up to
    /// [`REPLICA_WAIT`]; fewer: the lock is released and nothing is sold
    /// (busy, `not_replicated`). `None` or 0: no WAIT.
    pub replicas: Option<u8>,
}

/// The most replicas a request can ask to acknowledge its lock.
pub const MAX_REPLICAS: u64 = 5;

/// How long a lock waits for its replicas (`replicas`).
pub const REPLICA_WAIT: Duration = Duration::from_millis(100);

/// A whole `/deductStock` request after parsing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeductRequest {
    pub sku: Sku,
    pub knobs: Knobs,
    pub request_id: Option<String>,
    /// The schedule this request is a buyer of (chaos mode only): it waits
    /// at each gate until its run's scheduler lets it go.
    pub schedule: Option<Schedule>,
}

/// `schedule=RUN:BUYER`: a buyer of one scheduled run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Schedule {
    pub run: String,
    pub buyer: String,
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.run, self.buyer)
    }
}

impl Schedule {
    /// `RUN:BUYER`, each 1 to 64 characters of `[A-Za-z0-9_-]`.
    pub fn parse(raw: &str) -> Result<Schedule, InputError> {
        let name = |part: &str| {
            (1..=64).contains(&part.len())
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        match raw.split_once(':') {
            Some((run, buyer)) if name(run) && name(buyer) => Ok(Schedule {
                run: run.to_owned(),
                buyer: buyer.to_owned(),
            }),
            _ => Err(InputError::new(
                "schedule",
                format!(
                    "must be RUN:BUYER, each 1 to 64 characters of A-Z, a-z, 0-9, '_' or '-', got {}",
                    quoted(raw)
                ),
            )),
        }
    }
}

impl DeductRequest {
    /// Parses the query string's pairs. Unknown or repeated parameters are
    /// refused: a typo such as `work_sm=500` would otherwise silently run a
    /// different experiment than the one the user meant.
    pub fn parse<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, InputError> {
        let mut request = DeductRequest::default();
        let mut seen: Vec<&str> = Vec::new();
        for (name, value) in pairs {
            if seen.contains(&name) {
                return Err(InputError::new(name, "given more than once"));
            }
            match name {
                "sku" => request.sku = Sku::parse(value)?,
                "work_ms" => {
                    request.knobs.work =
                        Duration::from_millis(parse_ms(name, value, 0, MAX_WORK_MS)?)
                }
                "lease_ms" => {
                    request.knobs.lease = Some(Duration::from_millis(parse_ms(
                        name,
                        value,
                        MIN_LEASE_MS,
                        MAX_LEASE_MS,
                    )?))
                }
                "wait_ms" => {
                    request.knobs.wait = Some(Duration::from_millis(parse_ms(
                        name,
                        value,
                        0,
                        MAX_WAIT_MS,
                    )?))
                }
                "request_id" => request.request_id = Some(parse_request_id(value)?),
                "schedule" => request.schedule = Some(Schedule::parse(value)?),
                "sold_out_mark" => {
                    request.knobs.sold_out_mark = Some(match value {
                        "1" => true,
                        "0" => false,
                        _ => {
                            return Err(InputError::new(
                                name,
                                format!("must be 0 or 1, got {}", quoted(value)),
                            ));
                        }
                    })
                }
                "replicas" => {
                    let refuse = || {
                        InputError::new(
                            name,
                            format!(
                                "must be a whole number of replicas from 0 to {MAX_REPLICAS}, got {}",
                                quoted(value)
                            ),
                        )
                    };
                    let digits = !value.is_empty() && value.len() <= 3;
                    if !digits || !value.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(refuse());
                    }
                    let n: u64 = value.parse().map_err(|_| refuse())?;
                    if n > MAX_REPLICAS {
                        return Err(refuse());
                    }
                    request.knobs.replicas = Some(n as u8);
                }
                other => {
                    return Err(InputError::new(
                        quoted(other),
                        "unknown parameter; known: sku, work_ms, lease_ms, wait_ms, request_id, sold_out_mark, replicas, schedule",
                    ));
                }
            }
            seen.push(name);
        }
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knobs::DEFAULT_SKU;

    #[test]
    fn a_schedule_is_a_run_and_a_buyer() {
        let schedule = Schedule::parse("run-1:A").unwrap();
        assert_eq!(
            (schedule.run.as_str(), schedule.buyer.as_str()),
            ("run-1", "A")
        );
        for bad in ["", "run", ":A", "run:", "a:b:c", "r un:A", "run:{A}"] {
            assert_eq!(
                Schedule::parse(bad).unwrap_err().field,
                "schedule",
                "{bad:?}"
            );
        }
        assert!(Schedule::parse(&format!("{}:A", "r".repeat(65))).is_err());
    }

    #[test]
    fn request_parses_every_knob_and_refuses_unknown_or_repeated() {
        let r = DeductRequest::parse([
            ("sku", "s1"),
            ("work_ms", "5"),
            ("lease_ms", "100"),
            ("wait_ms", "0"),
        ])
        .unwrap();
        assert_eq!(r.sku.as_str(), "s1");
        assert_eq!(r.knobs.work, Duration::from_millis(5));
        assert_eq!(r.knobs.lease, Some(Duration::from_millis(100)));
        assert_eq!(r.knobs.wait, Some(Duration::ZERO));

        let defaults = DeductRequest::parse([]).unwrap();
        assert_eq!(defaults.sku.as_str(), DEFAULT_SKU);
        assert_eq!(defaults.knobs, Knobs::default());

        assert!(
            DeductRequest::parse([("work_sm", "5")])
                .unwrap_err()
                .reason
                .contains("unknown")
        );
        assert_eq!(
            DeductRequest::parse([("sku", "a"), ("sku", "b")])
                .unwrap_err()
                .field,
            "sku"
        );
    }
}
