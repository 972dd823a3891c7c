//! A relay between clients and PostgreSQL that can lose one answer: armed
//! with a piece of SQL, it forwards the next statement that carries it
//! (a simple query, or an extended query's Execute and its Sync), waits
//! until the server has answered it, and then closes that connection
//! without passing the answer on. The statement was run, and committed if
//! it commits; its client never learns so: the lost commit answer, made to
//! happen every time instead of once in a while.
//!
//! It can also cut its connections off for a while (a partition): every
//! byte either way is held, nothing closed, until the partition ends, and
//! a side that closed meanwhile is seen closed only then.
//!
//! It reads the client's half of PostgreSQL's wire protocol (v3) only as
//! far as it must: the untyped start-up messages, then each message's type
//! and length, and the SQL in `Q`, `P` (Parse) and `B` (Bind). Every byte
//! is forwarded unchanged until the cut.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinSet;

/// The relay, running in this process until dropped.
pub struct PgRelay {
    listen: SocketAddr,
    armed: Arc<Mutex<Option<Armed>>>,
    partition: Arc<Partition>,
    accept: tokio::task::JoinHandle<()>,
}

/// Until when the relay's connections carry nothing.
#[derive(Default)]
struct Partition {
    until: Mutex<Option<tokio::time::Instant>>,
}

impl Partition {
    /// Returns once no partition holds the connections.
    async fn pass(&self) {
        loop {
            let until = *self.until.lock().unwrap_or_else(PoisonError::into_inner);
            match until {
                Some(until) if until > tokio::time::Instant::now() => {
                    tokio::time::sleep_until(until).await;
                }
                _ => return,
            }
        }
    }
}

struct Armed {
    sql: String,
    cut: oneshot::Sender<()>,
}

impl PgRelay {
    /// Starts relaying from a free loopback port to `to` (from within a
    /// Tokio runtime: it listens at once, and accepts on a task of it).
    pub fn start(to: SocketAddr) -> anyhow::Result<PgRelay> {
        let listener =
            std::net::TcpListener::bind(("127.0.0.1", 0)).context("the relay cannot listen")?;
        listener.set_nonblocking(true)?;
        let listen = listener.local_addr()?;
        let armed: Arc<Mutex<Option<Armed>>> = Arc::default();
        let shared = armed.clone();
        let partition: Arc<Partition> = Arc::default();
        let cut_off = partition.clone();
        let accept = tokio::spawn(async move {
            let Ok(listener) = TcpListener::from_std(listener) else {
                return;
            };
            // Dropped with the accept task: every connection ends with it.
            let mut connections = JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                let armed = shared.clone();
                let partition = cut_off.clone();
                connections.spawn(async move {
                    if let Ok(server) = TcpStream::connect(to).await {
                        let _ = relay(client, server, armed, &partition).await;
                    }
                });
            }
        });
        Ok(PgRelay {
            listen,
            armed,
            partition,
            accept,
        })
    }

    /// Where clients connect.
    pub fn listen(&self) -> SocketAddr {
        self.listen
    }

    /// A relay in front of the PostgreSQL of `url` (its first host and
    /// port), and `url` pointed at the relay instead.
    pub fn in_front_of(url: &str) -> anyhow::Result<(PgRelay, String)> {
        use std::net::ToSocketAddrs;
        let config: tokio_postgres::Config = url.parse().context("a PostgreSQL URL")?;
        let host = match config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
            _ => anyhow::bail!("the relay needs PostgreSQL's TCP host"),
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let to = (host.as_str(), port)
            .to_socket_addrs()?
            .next()
            .context("PostgreSQL's host has no address")?;
        let relay = PgRelay::start(to)?;
        let through = relay.url_through(url)?;
        Ok((relay, through))
    }

    /// `url` (a PostgreSQL URL) pointed at the relay instead.
    pub fn url_through(&self, url: &str) -> anyhow::Result<String> {
        let (head, tail) = url.split_once('@').context("a URL with user@host:port")?;
        let (_, path) = tail.split_once('/').unwrap_or((tail, ""));
        Ok(format!("{head}@{}/{path}", self.listen))
    }

    /// Arms the cut: the next statement carrying `sql` (case-insensitive),
    /// on any connection, is forwarded and answered, and its connection
    /// closed before the answer reaches the client. The receiver completes
    /// once that happened.
    pub fn cut_after(&self, sql: &str) -> oneshot::Receiver<()> {
        let (cut, done) = oneshot::channel();
        *self.armed.lock().unwrap_or_else(PoisonError::into_inner) = Some(Armed {
            sql: sql.to_ascii_lowercase(),
            cut,
        });
        done
    }
}

impl PgRelay {
    /// Cuts every connection off for `how_long` from now: the bytes either
    /// way are held, no connection is closed (a partition, as the two ends
    /// see it: silence). Each connection carries on after, with what it
    /// held; one whose other end closed meanwhile closes then.
    pub fn partition(&self, how_long: Duration) {
        let until = tokio::time::Instant::now() + how_long;
        *self
            .partition
            .until
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(until);
    }
}

impl Drop for PgRelay {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// One connection: the client's messages read and forwarded, the server's
/// copied back until a cut.
///
/// Every simple query and every Sync (and the start-up) is answered by
/// exactly one ReadyForQuery (`Z`): counting both sides tells which of the
/// server's messages answer the cut statement. Those are swallowed, and
/// once its `Z` has come (the server has done it), the connection closes.
async fn relay(
    client: TcpStream,
    server: TcpStream,
    armed: Arc<Mutex<Option<Armed>>>,
    partition: &Arc<Partition>,
) -> std::io::Result<()> {
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let state = Arc::new(CutState::default());
    let back = {
        let state = state.clone();
        let partition = partition.clone();
        tokio::spawn(async move {
            let _ = copy_back(&mut from_server, &mut to_client, &state, &partition).await;
            // The server's side closed: the client learns it once no
            // partition holds the connection.
            partition.pass().await;
        })
    };
    let mut reader = Messages::default();
    loop {
        let message = reader.next(&mut from_client).await?;
        partition.pass().await;
        if reader.asked_for_tls(&message) {
            state.tls_asked.store(true, SeqCst);
        }
        let cut = match reader.carries(&message) {
            Some(sql) => take_if_armed(&armed, &sql),
            None => None,
        };
        if reader.answered_by_ready(&message) {
            let sent = state.syncs.fetch_add(1, SeqCst) + 1;
            if cut.is_some() {
                state.cut_at.store(sent, SeqCst);
            }
        }
        to_server.write_all(&message.bytes).await?;
        if let Some(cut) = cut {
            state.answered.notified().await;
            back.abort();
            let _ = cut.send(());
            // Both halves dropped here: the client sees its connection
            // closed, with no answer.
            return Ok(());
        }
    }
}

/// What the two directions of a connection share.
#[derive(Default)]
struct CutState {
    /// Start-ups, simple queries and Syncs forwarded.
    syncs: AtomicU64,
    /// Which of them is the cut statement's (0: none).
    cut_at: AtomicU64,
    /// The client asked for TLS: the server's first answer is one byte.
    tls_asked: AtomicBool,
    /// The cut statement's ReadyForQuery came.
    answered: Notify,
}

/// Copies the server's messages to the client, up to the answer of the
/// cut statement, which it swallows.
async fn copy_back(
    from: &mut (impl AsyncReadExt + Unpin),
    to: &mut (impl AsyncWriteExt + Unpin),
    state: &CutState,
    partition: &Partition,
) -> std::io::Result<()> {
    let mut readies = 0u64;
    let mut first = true;
    loop {
        let mut bytes = Vec::new();
        if std::mem::take(&mut first) && state.tls_asked.load(SeqCst) {
            // `N` (no TLS) or `S`: one byte, untyped.
            bytes.push(from.read_u8().await?);
            to.write_all(&bytes).await?;
            continue;
        }
        let kind = from.read_u8().await?;
        let len = from.read_u32().await?;
        bytes.push(kind);
        bytes.extend_from_slice(&len.to_be_bytes());
        let start = bytes.len();
        bytes.resize(start + (len as usize).saturating_sub(4), 0);
        from.read_exact(&mut bytes[start..]).await?;
        let cut_at = state.cut_at.load(SeqCst);
        if cut_at != 0 && readies + 1 >= cut_at {
            if kind == b'Z' {
                state.answered.notify_one();
                return Ok(());
            }
            continue;
        }
        if kind == b'Z' {
            readies += 1;
        }
        partition.pass().await;
        to.write_all(&bytes).await?;
    }
}

/// The armed cut, taken if `sql` carries its text.
fn take_if_armed(armed: &Mutex<Option<Armed>>, sql: &str) -> Option<oneshot::Sender<()>> {
    let mut armed = armed.lock().unwrap_or_else(PoisonError::into_inner);
    let matches = armed
        .as_ref()
        .is_some_and(|a| sql.to_ascii_lowercase().contains(&a.sql));
    matches.then(|| armed.take().map(|a| a.cut)).flatten()
}

/// One client message, whole, as read.
struct Message {
    kind: u8,
    bytes: Vec<u8>,
}

/// The client's side of the protocol as far as the relay follows it.
#[derive(Default)]
struct Messages {
    /// Past the start-up: every message starts with its type.
    typed: bool,
    /// Parsed statements' SQL, by name.
    statements: HashMap<Vec<u8>, String>,
    /// The SQL of the statement last bound, and whether it was executed
    /// since the last Sync.
    bound: Option<String>,
    executed: bool,
}

/// The start-up message's protocol version (3.0).
const PROTOCOL_3: u32 = 196_608;
/// The code of a request for TLS, sent before the start-up.
const TLS_REQUEST: u32 = 80_877_103;

impl Messages {
    async fn next(&mut self, from: &mut (impl AsyncReadExt + Unpin)) -> std::io::Result<Message> {
        let mut bytes = Vec::new();
        let kind = if self.typed {
            let kind = from.read_u8().await?;
            bytes.push(kind);
            kind
        } else {
            0
        };
        let len = from.read_u32().await?;
        bytes.extend_from_slice(&len.to_be_bytes());
        let body_len = (len as usize).saturating_sub(4);
        let start = bytes.len();
        bytes.resize(start + body_len, 0);
        from.read_exact(&mut bytes[start..]).await?;
        if !self.typed && body_len >= 4 {
            let code = u32::from_be_bytes([
                bytes[start],
                bytes[start + 1],
                bytes[start + 2],
                bytes[start + 3],
            ]);
            // SSL and GSS requests come before it, untyped too.
            self.typed = code == PROTOCOL_3;
        }
        Ok(Message { kind, bytes })
    }

    /// Whether the server answers `message` with a ReadyForQuery: the
    /// start-up, a simple query, a Sync.
    fn answered_by_ready(&self, message: &Message) -> bool {
        match message.kind {
            0 => self.typed,
            kind => kind == b'Q' || kind == b'S',
        }
    }

    /// Whether `message` is a request for TLS (answered by one byte).
    fn asked_for_tls(&self, message: &Message) -> bool {
        message.kind == 0 && message.bytes.get(4..8) == Some(&TLS_REQUEST.to_be_bytes()[..])
    }

    /// The SQL whose effect this message sets off, if it does: a simple
    /// query's, or at a Sync, the SQL of the statement executed since the
    /// last one.
    fn carries(&mut self, message: &Message) -> Option<String> {
        let body = message.bytes.get(5..).unwrap_or_default();
        match message.kind {
            b'Q' => Some(cstrings(body).next()?.to_owned()),
            b'P' => {
                let mut parts = body.split(|&b| b == 0);
                let name = parts.next()?.to_vec();
                let sql = String::from_utf8_lossy(parts.next()?).into_owned();
                self.statements.insert(name, sql);
                None
            }
            b'B' => {
                let mut parts = body.split(|&b| b == 0);
                let _portal = parts.next()?;
                let statement = parts.next()?;
                self.bound = self.statements.get(statement).cloned();
                None
            }
            b'E' => {
                self.executed = self.bound.is_some();
                None
            }
            b'S' => {
                let executed = std::mem::take(&mut self.executed);
                executed.then(|| self.bound.take()).flatten()
            }
            _ => None,
        }
    }
}

/// The NUL-terminated strings of a message body, as text.
fn cstrings(body: &[u8]) -> impl Iterator<Item = &str> {
    body.split(|&b| b == 0)
        .map(|s| std::str::from_utf8(s).unwrap_or_default())
}
