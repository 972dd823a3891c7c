//! User input, parsed into domain types (parse, don't validate).
//!
//! Everything a request can say arrives here as text and leaves either as a
//! typed value or as an [`InputError`] naming the field and the reason. Nothing
//! user-supplied goes further as a raw string.

use std::fmt;
use std::time::Duration;

/// Default SKU when a request names none (the articles' coupon `00001`).
pub const DEFAULT_SKU: &str = "00001";
/// Upper bound of `work_ms` and `wait_ms`: one minute.
pub const MAX_WORK_MS: u64 = 60_000;
pub const MAX_WAIT_MS: u64 = 60_000;
/// Upper bound of `lease_ms`: ten minutes.
pub const MAX_LEASE_MS: u64 = 600_000;
/// Lower bound of `lease_ms`: a watchdog renews every lease/3, so this keeps
/// it to one renewal per 10 ms at most (`lease_ms=1` with `work_ms=60000`
/// would otherwise make 60 000 renewals).
pub const MIN_LEASE_MS: u64 = 30;
/// Upper bound of a reset's stock: large enough for any workshop, small
/// enough that `initial - remaining` cannot overflow.
pub const MAX_STOCK: i64 = 1_000_000_000;
/// How many buckets `lua-sharded`'s stock is split into unless asked otherwise.
pub const DEFAULT_BUCKETS: u32 = 8;
/// The most buckets one SKU's stock may be split into (`lua-sharded`).
pub const MAX_BUCKETS: u32 = 64;

/// Why a piece of input was refused: which field, and a sentence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputError {
    pub field: String,
    pub reason: String,
}

impl InputError {
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

impl std::error::Error for InputError {}

/// Shows a refused value in an error message without echoing a huge or
/// control-character-laden string back.
fn quoted(raw: &str) -> String {
    const SHOWN: usize = 40;
    let mut shown: String = raw.chars().take(SHOWN).collect();
    if raw.chars().count() > SHOWN {
        shown.push('…');
    }
    format!("{shown:?}")
}

/// A stock-keeping unit: `[A-Za-z0-9_-]{1,64}`. The restriction keeps every
/// Redis key of the SKU printable and the hash tag `{sku}` unambiguous.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sku(String);

impl Sku {
    pub fn parse(raw: &str) -> Result<Self, InputError> {
        let ok_len = (1..=64).contains(&raw.len());
        let ok_chars = raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if ok_len && ok_chars {
            Ok(Self(raw.to_owned()))
        } else {
            Err(InputError::new(
                "sku",
                format!(
                    "must be 1 to 64 characters of A-Z, a-z, 0-9, '_' or '-', got {}",
                    quoted(raw)
                ),
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Sku {
    fn default() -> Self {
        Self(DEFAULT_SKU.to_owned())
    }
}

impl fmt::Display for Sku {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parses a bounded count of milliseconds. Only plain decimal digits are
/// accepted: no sign, no spaces, no exponent, no fraction.
pub fn parse_ms(field: &str, raw: &str, min: u64, max: u64) -> Result<u64, InputError> {
    let refuse = || {
        InputError::new(
            field,
            format!(
                "must be a whole number of milliseconds from {min} to {max}, got {}",
                quoted(raw)
            ),
        )
    };
    if raw.is_empty() || raw.len() > 20 || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(refuse());
    }
    let value: u64 = raw.parse().map_err(|_| refuse())?;
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(refuse())
    }
}

/// Parses a reset's stock: 0 to [`MAX_STOCK`].
pub fn parse_stock(value: i64) -> Result<i64, InputError> {
    if (0..=MAX_STOCK).contains(&value) {
        Ok(value)
    } else {
        Err(InputError::new(
            "stock",
            format!("must be from 0 to {MAX_STOCK}, got {value}"),
        ))
    }
}

/// Parses a reset's bucket count: 0 (one key) to [`MAX_BUCKETS`].
pub fn parse_buckets(value: u32) -> Result<u32, InputError> {
    if value <= MAX_BUCKETS {
        Ok(value)
    } else {
        Err(InputError::new(
            "buckets",
            format!("must be from 0 to {MAX_BUCKETS}, got {value}"),
        ))
    }
}

/// The largest clock offset chaos mode accepts: one day either way.
pub const MAX_CLOCK_SKEW_MS: i64 = 86_400_000;

/// Parses a chaos clock offset: at most a day ahead or behind.
pub fn parse_clock_skew(ms: i64) -> Result<i64, InputError> {
    if (-MAX_CLOCK_SKEW_MS..=MAX_CLOCK_SKEW_MS).contains(&ms) {
        Ok(ms)
    } else {
        Err(InputError::new(
            "ms",
            format!(
                "a clock offset must be from -{MAX_CLOCK_SKEW_MS} to {MAX_CLOCK_SKEW_MS}, got {ms}"
            ),
        ))
    }
}

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

/// An idempotency key: `[A-Za-z0-9_-]{1,128}`. A retry with the same key
/// gets the first attempt's answer and never sells twice.
pub fn parse_request_id(raw: &str) -> Result<String, InputError> {
    let ok = (1..=128).contains(&raw.len())
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(raw.to_owned())
    } else {
        Err(InputError::new(
            "request_id",
            format!(
                "must be 1 to 128 characters of A-Z, a-z, 0-9, '_' or '-', got {}",
                quoted(raw)
            ),
        ))
    }
}

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
    fn sku_accepts_the_documented_alphabet_only() {
        assert!(Sku::parse("00001").is_ok());
        assert!(Sku::parse("a-B_9").is_ok());
        assert!(Sku::parse(&"x".repeat(64)).is_ok());
        for bad in ["", "a b", "a{b}", "é", "a/b", "a:b", "\u{0}"] {
            assert_eq!(Sku::parse(bad).unwrap_err().field, "sku", "{bad:?}");
        }
        assert!(Sku::parse(&"x".repeat(65)).is_err());
    }

    #[test]
    fn milliseconds_are_plain_bounded_digits() {
        assert_eq!(parse_ms("work_ms", "0", 0, 10), Ok(0));
        assert_eq!(parse_ms("work_ms", "10", 0, 10), Ok(10));
        for bad in [
            "",
            "-1",
            "+1",
            " 1",
            "1.0",
            "1e3",
            "11",
            "0x1",
            "١",
            "99999999999999999999999",
        ] {
            let err = parse_ms("work_ms", bad, 0, 10).unwrap_err();
            assert_eq!(err.field, "work_ms", "{bad:?}");
            assert!(err.reason.contains("from 0 to 10"), "{}", err.reason);
        }
        assert!(parse_ms("lease_ms", "0", 1, 10).is_err());
        // A lease below the floor would let a watchdog renew more than once per 10 ms.
        for (raw, accepted) in [("29", false), ("30", true)] {
            let parsed = DeductRequest::parse([("lease_ms", raw)]);
            assert_eq!(parsed.is_ok(), accepted, "lease_ms={raw}");
        }
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

    #[test]
    fn long_values_are_not_echoed_whole() {
        let huge = "9".repeat(10_000);
        let err = parse_ms("work_ms", &huge, 0, 10).unwrap_err();
        assert!(err.reason.len() < 200, "{}", err.reason.len());
    }
}
