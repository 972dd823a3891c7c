//! The engine's HTTP/1.1 client: one keep-alive connection that writes a
//! request prepared once as bytes and reads each answer into a buffer it
//! keeps. No connection task, no channels, no header map.
//!
//! Why not hyper's client: profiled under `bench` (`perf record -g`), about
//! a third of the generator's CPU went to hyper's client machinery, per
//! request: the request sent through an mpsc channel to the connection's
//! dispatcher and the answer back through a oneshot, a `HeaderMap` built
//! (allocations) for headers the engine never reads, the body streamed
//! through another channel, and the wake-ups between them. On a small
//! machine the generator shares the cores with the servers it measures, so
//! each of its microseconds is one the servers lose. This client makes the
//! same system calls per request (one write, one read) and little else.
//!
//! It understands what the engine needs and no more: the status,
//! `Content-Length`, chunked and read-until-close bodies, 1xx interim
//! answers, `Connection: close`, and whether a 503's body says the outcome
//! is unknown. A request is never retried: a sale may not be sent twice.

use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How a 503 answer of unknown outcome says so in its body.
const UNKNOWN_OUTCOME: &[u8] = br#""outcome":"unknown""#;

/// Header fields an answer may have (nginx and axum send fewer than ten).
const MAX_HEADERS: usize = 64;

/// An answer's head may not be longer than this ...
const MAX_HEAD: usize = 64 * 1024;

/// ... nor the whole answer, which is kept in memory until it is complete
/// (the stack's biggest answer, the dashboard's page, is far smaller).
const MAX_ANSWER: usize = 16 * 1024 * 1024;

/// A request as the bytes sent for it: `METHOD path HTTP/1.1`, `Host`,
/// `User-Agent`.
#[derive(Clone, Debug)]
pub(super) struct Prepared {
    bytes: Vec<u8>,
    /// A HEAD request's answer has a head only, whatever it says.
    head: bool,
}

impl Prepared {
    /// `path` (with its query) must be a valid request target: it is
    /// checked as a URI, so nothing in it can break the request line.
    pub(super) fn new(method: &hyper::Method, path: &str, host: &str) -> Result<Self, String> {
        let uri: hyper::Uri = path
            .parse()
            .map_err(|err| format!("{path:?} is not a request path: {err}"))?;
        let target = uri
            .path_and_query()
            .filter(|_| uri.scheme().is_none() && path.starts_with('/'))
            .ok_or_else(|| format!("{path:?} is not a request path (it starts with '/')"))?;
        let bytes = format!(
            "{method} {target} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: stocklock-load\r\n\r\n"
        )
        .into_bytes();
        Ok(Self {
            bytes,
            head: method == hyper::Method::HEAD,
        })
    }
}

/// One answer as the engine keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Answer {
    pub(super) status: u16,
    /// A 503 whose body says `"outcome":"unknown"`.
    pub(super) unknown: bool,
    /// A 200's `"unit"`: which unit was sold.
    pub(super) unit: Option<i64>,
    /// The server keeps the connection open for the next request.
    pub(super) keep_alive: bool,
}

/// The connection cannot carry this exchange (closed, reset, or an answer
/// that is not HTTP/1.1); it is not to be used again.
#[derive(Debug)]
pub(super) struct Broken;

impl From<io::Error> for Broken {
    fn from(_: io::Error) -> Self {
        Broken
    }
}

/// One keep-alive connection and the buffer its answers are read into.
pub(super) struct Connection {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Connection {
    pub(super) async fn open(addr: SocketAddr) -> io::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            buf: Vec::with_capacity(READ_SIZE),
        })
    }

    /// Whether the connection can carry another request: the last answer
    /// was read whole, so anything readable now is the server closing it
    /// (an idle keep-alive timed out) or bytes nobody asked for. Costs no
    /// system call unless the socket was reported readable.
    pub(super) fn reusable(&self) -> bool {
        let mut probe = [0u8; 1];
        matches!(self.stream.try_read(&mut probe), Err(err) if err.kind() == io::ErrorKind::WouldBlock)
    }

    /// Sends `request` and reads its whole answer.
    pub(super) async fn exchange(&mut self, request: &Prepared) -> Result<Answer, Broken> {
        self.stream.write_all(&request.bytes).await?;
        self.buf.clear();
        loop {
            if self.buf.capacity() - self.buf.len() < READ_SIZE / 2 {
                self.buf.reserve(READ_SIZE);
            }
            let eof = self.stream.read_buf(&mut self.buf).await? == 0;
            match parse(&self.buf, request.head, eof)? {
                Parsed::Partial if eof => return Err(Broken),
                Parsed::Partial if self.buf.len() > MAX_ANSWER => return Err(Broken),
                Parsed::Partial => {}
                // Bytes after the answer: the server sent what was not
                // asked for (the engine never pipelines).
                Parsed::Complete { answer, end } if end < self.buf.len() => {
                    return Ok(Answer {
                        keep_alive: false,
                        ..answer
                    });
                }
                Parsed::Complete { answer, .. } => return Ok(answer),
            }
        }
    }
}

/// Room for a read: an answer of the stack's API fits in one.
const READ_SIZE: usize = 16 * 1024;

/// What the bytes read so far hold.
#[derive(Debug, PartialEq, Eq)]
enum Parsed {
    /// More bytes are needed.
    Partial,
    /// One whole answer, ending at byte `end`.
    Complete { answer: Answer, end: usize },
}

/// How an answer's body ends (RFC 9112 §6.3).
enum Framing {
    Empty,
    Length(usize),
    Chunked,
    /// No length and not chunked: the body runs until the server closes.
    UntilClose,
}

/// Parses one answer from the start of `buf`, skipping 1xx interim answers.
/// `head_request`: the request was HEAD (no body whatever the head says);
/// `eof`: the server has closed its side (ends a read-until-close body).
fn parse(buf: &[u8], head_request: bool, eof: bool) -> Result<Parsed, Broken> {
    let mut start = 0;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        let head_len = match response.parse(&buf[start..]).map_err(|_| Broken)? {
            httparse::Status::Complete(len) => len,
            httparse::Status::Partial if buf.len() - start > MAX_HEAD => return Err(Broken),
            httparse::Status::Partial => return Ok(Parsed::Partial),
        };
        let status = response.code.ok_or(Broken)?;
        let body_start = start + head_len;
        if (100..200).contains(&status) {
            // 101 would switch protocols, which a GET of the engine never asks for.
            if status == 101 {
                return Err(Broken);
            }
            start = body_start;
            continue;
        }

        let mut length: Option<usize> = None;
        let mut chunked = false;
        let mut transfer_coded = false;
        let mut close = response.version == Some(0);
        for header in response.headers.iter() {
            if header.name.eq_ignore_ascii_case("content-length") {
                let value = std::str::from_utf8(header.value)
                    .ok()
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .ok_or(Broken)?;
                if length.is_some_and(|known| known != value) {
                    return Err(Broken);
                }
                length = Some(value);
            } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
                transfer_coded = true;
                // Chunked only when it is the last coding applied.
                chunked = header
                    .value
                    .rsplit(|&b| b == b',')
                    .next()
                    .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            } else if header.name.eq_ignore_ascii_case("connection") {
                let tokens = header.value.split(|&b| b == b',');
                for token in tokens {
                    let token = token.trim_ascii();
                    if token.eq_ignore_ascii_case(b"close") {
                        close = true;
                    } else if token.eq_ignore_ascii_case(b"keep-alive")
                        && response.version == Some(0)
                    {
                        close = false;
                    }
                }
            }
        }
        let framing = if head_request || status == 204 || status == 304 {
            Framing::Empty
        } else if transfer_coded {
            if chunked {
                Framing::Chunked
            } else {
                Framing::UntilClose
            }
        } else {
            match length {
                Some(length) => Framing::Length(length),
                None => Framing::UntilClose,
            }
        };

        let keep_alive = !close && !matches!(framing, Framing::UntilClose);
        let answer = |end: usize, body: &[u8]| {
            Ok(Parsed::Complete {
                answer: Answer {
                    status,
                    unknown: status == 503 && says_unknown(body),
                    unit: if status == 200 { unit_of(body) } else { None },
                    keep_alive,
                },
                end,
            })
        };
        let body = &buf[body_start..];
        return match framing {
            Framing::Empty => answer(body_start, b""),
            Framing::Length(length) if body.len() < length => Ok(Parsed::Partial),
            Framing::Length(length) => answer(body_start + length, &body[..length]),
            Framing::UntilClose if !eof => Ok(Parsed::Partial),
            Framing::UntilClose => answer(buf.len(), body),
            Framing::Chunked => {
                let mut decoded = Vec::new();
                let keep = status == 503 || status == 200;
                match walk_chunks(body, |data| {
                    if keep {
                        decoded.extend_from_slice(data)
                    }
                })? {
                    None => Ok(Parsed::Partial),
                    Some(len) => answer(body_start + len, &decoded),
                }
            }
        };
    }
}

/// The `"unit":N` of a sale's body (the history records which unit).
fn unit_of(body: &[u8]) -> Option<i64> {
    const UNIT: &[u8] = br#""unit":"#;
    let at = body.windows(UNIT.len()).position(|w| w == UNIT)? + UNIT.len();
    let digits = body[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&body[at..at + digits])
        .ok()?
        .parse()
        .ok()
}

fn says_unknown(body: &[u8]) -> bool {
    body.windows(UNKNOWN_OUTCOME.len())
        .any(|w| w == UNKNOWN_OUTCOME)
}

/// Walks a chunked body at the start of `body`, handing each chunk's data
/// to `on_data`: `Some(length)` of the whole encoded body (trailers
/// included) once it is complete, `None` while more bytes are needed.
/// Steps over data by its size, so walking again after each read is cheap.
fn walk_chunks(body: &[u8], mut on_data: impl FnMut(&[u8])) -> Result<Option<usize>, Broken> {
    let mut at = 0;
    loop {
        let (line, size) = match httparse::parse_chunk_size(&body[at..]).map_err(|_| Broken)? {
            httparse::Status::Complete(found) => found,
            httparse::Status::Partial => return Ok(None),
        };
        at += line;
        if size == 0 {
            // Trailer fields, each a line, then an empty line.
            loop {
                let rest = &body[at..];
                let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else {
                    return Ok(None);
                };
                at += eol + 2;
                if eol == 0 {
                    return Ok(Some(at));
                }
            }
        }
        let size = usize::try_from(size).map_err(|_| Broken)?;
        let end = at.checked_add(size).ok_or(Broken)?;
        if body.len() < end + 2 {
            return Ok(None);
        }
        if &body[end..end + 2] != b"\r\n" {
            return Err(Broken);
        }
        on_data(&body[at..end]);
        at = end + 2;
    }
}

#[cfg(test)]
mod tests;
