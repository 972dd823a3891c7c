//! A fenced lock: every grant carries a fencing token from `INCR`, taken in
//! the same script as the grant, and the store refuses a write whose token
//! is older than the newest it has seen. Kleppmann's pause, played out:
//! alice is paused past her lease, bob takes the lock and writes, alice
//! wakes and writes with her old token: refused.
//!
//!     cargo run -p stocklock-lock --example fenced -- --redis-url redis://127.0.0.1:PORT
//!
//! Exits 1 if the lock does not behave as described.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::Parser;
use redis::Script;
use stocklock_lock::store::{Conn, Store};
use stocklock_lock::{OwnerId, ReentrantLock, Wakeups};

#[derive(Parser)]
struct Args {
    /// The Redis to lock on (and to keep the example's fenced value in).
    #[arg(long, env = "STOCKLOCK_REDIS_URL")]
    redis_url: String,
}

/// The store's side of fencing: write `value` only with a token at least
/// as new as the newest one seen, and remember it. Atomic, in one script.
const FENCED_WRITE: &str = r"
local newest = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[1]) < newest then return 0 end
redis.call('SET', KEYS[2], ARGV[1])
redis.call('SET', KEYS[1], ARGV[2])
return 1";

async fn write(conn: &Conn, token: i64, value: &str) -> anyhow::Result<bool> {
    let written: i64 = Script::new(FENCED_WRITE)
        .key("example:fenced:{order-42}:value")
        .key("example:fenced:{order-42}:newest-token")
        .arg(token)
        .arg(value)
        .invoke_async(&mut conn.clone())
        .await?;
    Ok(written == 1)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let store = Store::open(&args.redis_url)?;
    let wakeups = Wakeups::new();
    let _listener = wakeups.listen(store.client().clone());
    let conn = store.conn().await?;
    let lock = ReentrantLock::new(conn.clone(), "example:fenced:{order-42}:lock", wakeups)
        .fenced("example:fenced:{order-42}:fence");
    let (alice, bob) = (OwnerId::new("alice"), OwnerId::new("bob"));
    let lease = Duration::from_millis(300);

    let hers = lock
        .lock(&alice, lease, Duration::from_secs(2))
        .await?
        .context("the lock stayed held by someone else")?;
    let her_token = hers.token.context("a fenced grant has a token")?;
    // Alice checks her deadline: fine. Then her process is paused (a GC, a
    // SIGSTOP) for longer than the lease, between that check and her write.
    ensure!(Instant::now() < hers.deadline());
    tokio::time::sleep(lease * 2).await;

    let his = lock
        .lock(&bob, lease, Duration::from_secs(2))
        .await?
        .context("bob never got the lock alice's lease left")?;
    let his_token = his.token.context("a fenced grant has a token")?;
    ensure!(his_token > her_token, "tokens {her_token} then {his_token}");
    ensure!(
        write(&conn, his_token, "bob's").await?,
        "bob's write was refused"
    );
    lock.unlock_all(&bob).await?;

    // Alice wakes up and writes, unaware: the store refuses her old token.
    let hers_written = write(&conn, her_token, "alice's").await?;
    ensure!(!hers_written, "the stale write went through");
    println!(
        "alice (token {her_token}) was paused past her lease; bob (token {his_token}) wrote; \
         alice's late write was refused by the store"
    );
    Ok(())
}
