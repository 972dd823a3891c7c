//! Tests of `http1.rs`.

use super::*;

fn complete(buf: &[u8]) -> (Answer, usize) {
    match parse(buf, false, false) {
        Ok(Parsed::Complete { answer, end }) => (answer, end),
        other => panic!("not a complete answer: {other:?}"),
    }
}

#[test]
fn a_request_is_its_line_host_and_agent() {
    let request = Prepared::new(
        &hyper::Method::GET,
        "/deductStock/lua?sku=a&work_ms=2",
        "127.0.0.1:8080",
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(request.bytes).unwrap(),
        "GET /deductStock/lua?sku=a&work_ms=2 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: stocklock-load\r\n\r\n"
    );
    assert!(!request.head);
}

#[test]
fn a_path_that_would_break_the_request_line_is_refused() {
    for bad in ["/a b", "/a\r\nX: y", "relative", "http://elsewhere/", ""] {
        assert!(
            Prepared::new(&hyper::Method::GET, bad, "h").is_err(),
            "{bad:?} accepted"
        );
    }
}

#[test]
fn a_content_length_answer_ends_after_its_body() {
    let answer = b"HTTP/1.1 409 Conflict\r\nContent-Length: 5\r\n\r\nhello";
    for cut in 0..answer.len() {
        assert_eq!(
            parse(&answer[..cut], false, false).unwrap(),
            Parsed::Partial
        );
    }
    let (got, end) = complete(answer);
    assert_eq!(end, answer.len());
    assert_eq!(
        got,
        Answer {
            status: 409,
            unknown: false,
            unit: None,
            keep_alive: true
        }
    );
}

#[test]
fn a_sales_unit_is_read_from_its_body_plain_or_chunked() {
    let body = r#"{"outcome":"sold","variant":"lua","sku":"a","unit":42,"remaining":41}"#;
    let plain = format!(
        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    assert_eq!(complete(plain.as_bytes()).0.unit, Some(42));
    let (a, b) = body.split_at(30);
    let chunked = format!(
        "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    );
    assert_eq!(complete(chunked.as_bytes()).0.unit, Some(42));
    // Only a sale names a unit.
    let refused = format!(
        "HTTP/1.1 409 Conflict\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    assert_eq!(complete(refused.as_bytes()).0.unit, None);
}

#[test]
fn only_a_503_that_says_so_is_of_unknown_outcome() {
    let body = br#"{"outcome":"unknown","request_id":"x"}"#;
    let with = |status: &str| {
        let mut buf = format!(
            "HTTP/1.1 {status}\r\ncontent-length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        buf.extend_from_slice(body);
        complete(&buf).0.unknown
    };
    assert!(with("503 Service Unavailable"));
    assert!(!with("200 OK"));
    let nothing_sent = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 31\r\n\r\n{\"error\":\"store_unavailable\"}  ";
    assert!(!complete(nothing_sent).0.unknown);
}

#[test]
fn a_chunked_answer_is_walked_to_its_last_chunk_and_trailers() {
    let answer = b"HTTP/1.1 503 x\r\nTransfer-Encoding: chunked\r\n\r\n6\r\n{\"outc\r\n14;ext=1\r\nome\":\"unknown\"} abcd\r\n0\r\nTrailer: t\r\n\r\n";
    for cut in 0..answer.len() {
        assert_eq!(
            parse(&answer[..cut], false, false).unwrap(),
            Parsed::Partial,
            "complete at {cut}"
        );
    }
    let (got, end) = complete(answer);
    assert_eq!(end, answer.len());
    assert!(got.unknown, "the marker split over two chunks is found");
    assert!(got.keep_alive);
    let bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n";
    assert!(parse(bad, false, false).is_err());
}

#[test]
fn connection_close_http_1_0_and_no_length_end_the_connection() {
    let (got, _) = complete(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
    assert!(!got.keep_alive);
    let (got, _) = complete(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n");
    assert!(!got.keep_alive);
    let (got, _) =
        complete(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n");
    assert!(got.keep_alive);
    let until_close = b"HTTP/1.1 200 OK\r\n\r\nall of it";
    assert_eq!(parse(until_close, false, false).unwrap(), Parsed::Partial);
    match parse(until_close, false, true).unwrap() {
        Parsed::Complete { answer, end } => {
            assert_eq!(end, until_close.len());
            assert!(!answer.keep_alive);
        }
        Parsed::Partial => panic!("the close ends the body"),
    }
}

#[test]
fn interim_answers_are_skipped_and_bodiless_answers_end_at_their_head() {
    let interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let (got, end) = complete(interim);
    assert_eq!((got.status, end), (200, interim.len()));
    let no_body = b"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n";
    assert_eq!(complete(no_body).1, no_body.len());
    let head = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n";
    assert!(matches!(
        parse(head, true, false).unwrap(),
        Parsed::Complete { end, .. } if end == head.len()
    ));
}

#[test]
fn malformed_answers_break_the_connection() {
    for bad in [
        &b"SMTP ready\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        b"HTTP/1.1 200 OK\r\nContent-Length: lots\r\n\r\n",
        b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
    ] {
        assert!(parse(bad, false, false).is_err(), "{bad:?}");
    }
}
