//! A seat's cookie: its id and an HMAC-SHA256 of the id under the stack's
//! admin token, so that a student cannot forge another seat (or a seat at
//! all) and every instance of the stack checks it alike.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The cookie's name.
pub const COOKIE: &str = "stocklock_seat";

fn mac(secret: &str, id: &str) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(b"stocklock seat ");
    mac.update(id.as_bytes());
    mac
}

/// The cookie's value for seat `id`: `ID.SIGNATURE` (hex).
pub fn seal(secret: &str, id: &str) -> String {
    let tag = mac(secret, id).finalize().into_bytes();
    let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
    format!("{id}.{hex}")
}

/// The seat a cookie's value names, if its signature is the stack's.
pub fn open(secret: &str, value: &str) -> Option<String> {
    let (id, hex) = value.split_once('.')?;
    if id.is_empty() || id.len() > 32 || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let tag: Option<Vec<u8>> = (0..32)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
        .collect();
    mac(secret, id).verify_slice(&tag?).ok()?;
    Some(id.to_owned())
}

/// The seat cookie's value among a request's `Cookie` headers.
pub fn from_headers(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|line| line.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_seat_opens_under_its_secret_alone_and_a_tampered_one_never() {
        let value = seal("teacher-token", "abc123");
        assert_eq!(open("teacher-token", &value).as_deref(), Some("abc123"));
        assert_eq!(open("another-token", &value), None);
        // Another seat's id under this one's signature.
        let forged = value.replacen("abc123", "abc124", 1);
        assert_eq!(open("teacher-token", &forged), None);
        for junk in [
            "",
            "abc",
            "abc.",
            ".00",
            "a.zz",
            "ab-c.00",
            &value[..value.len() - 1],
        ] {
            assert_eq!(open("teacher-token", junk), None, "{junk:?}");
        }
    }

    #[test]
    fn the_seat_cookie_is_found_among_others() {
        let mut headers = axum::http::HeaderMap::new();
        headers.append("cookie", "a=1; stocklock_seat=x.y".parse().unwrap());
        assert_eq!(from_headers(&headers), Some("x.y"));
        headers.clear();
        headers.append("cookie", "stocklock_seats=no".parse().unwrap());
        assert_eq!(from_headers(&headers), None);
    }
}
