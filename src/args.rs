//! Command-line values that several commands parse the same way. The
//! commands' config types (`LoadConfig`, `UpConfig`, ...) carry their own
//! clap derives and name these parsers; they live here, below both
//! [`crate::cli`] and the commands, so no command imports the command line.

use std::time::Duration;

use crate::variants::Variant;

/// Parses `500ms`, `10s`, `2m`, `1h`, or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 500ms, 10s, 2m or 1h"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("{text:?}: unit must be ms, s, m or h")),
    };
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= 86_400.0) {
        return Err(format!("{text:?} must be more than 0 and at most a day"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// As [`parse_duration`], and also `0` (in any unit): the flags whose
/// zero means "off" (`--sold-out-mark-ttl 0`: no marks).
pub fn parse_duration_or_zero(text: &str) -> Result<Duration, String> {
    let number = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    if number.parse::<f64>().is_ok_and(|value| value == 0.0) {
        parse_duration(&format!("1{}", &text[number.len()..]))?;
        return Ok(Duration::ZERO);
    }
    parse_duration(text)
}

/// A part of the stack turned on or off (`--orders on|off`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    On,
    Off,
}

impl Switch {
    pub fn is_on(self) -> bool {
        self == Switch::On
    }
}

/// Parses a variant's name, or says which names there are.
pub fn parse_variant(name: &str) -> Result<Variant, String> {
    name.parse().map_err(|_| {
        format!(
            "no variant {name:?}; valid: {}",
            Variant::names().join(", ")
        )
    })
}

/// A random admin token: 128 bits, hex. `serve` and `up` make one when
/// none is given, and print it.
pub fn generate_token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The well-known token older compose files defaulted to: refused.
const PLACEHOLDER_TOKEN: &str = "change-me";

/// `serve`'s admin token: the one given, or a generated one (printed).
/// The placeholder `change-me` is refused.
pub fn serve_admin_token(given: Option<String>) -> anyhow::Result<String> {
    match given {
        Some(token) if token == PLACEHOLDER_TOKEN => anyhow::bail!(
            "the admin token is `{PLACEHOLDER_TOKEN}`, a placeholder anyone who read the \
             compose file knows: set a secret of your own (e.g. STOCKLOCK_ADMIN_TOKEN=$(openssl rand -hex 16)), \
             or leave it unset and one is generated and printed"
        ),
        Some(token) if !token.is_empty() => Ok(token),
        _ => {
            let token = generate_token();
            println!("admin token: {token}");
            Ok(token)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_a_duration_only_where_it_means_off() {
        for zero in ["0", "0ms", "0s", "0.0m"] {
            assert_eq!(parse_duration_or_zero(zero), Ok(Duration::ZERO), "{zero}");
            assert!(parse_duration(zero).is_err(), "{zero}");
        }
        assert_eq!(
            parse_duration_or_zero("250ms"),
            Ok(Duration::from_millis(250))
        );
        for bad in ["0x", "-1", "", "ms", "2d"] {
            assert!(parse_duration_or_zero(bad).is_err(), "{bad}");
        }
    }
}
