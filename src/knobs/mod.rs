//! User input, parsed into domain types (parse, don't validate).
//!
//! Everything a request can say arrives here as text and leaves either as a
//! typed value or as an [`InputError`] naming the field and the reason. Nothing
//! user-supplied goes further as a raw string.

mod request;

pub use request::{DeductRequest, Knobs, MAX_REPLICAS, REPLICA_WAIT, Schedule};

use std::fmt;

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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn long_values_are_not_echoed_whole() {
        let huge = "9".repeat(10_000);
        let err = parse_ms("work_ms", &huge, 0, 10).unwrap_err();
        assert!(err.reason.len() < 200, "{}", err.reason.len());
    }
}
