//! The lease lock (`SET NX PX` with an owner token, compare-and-delete
//! release): a second owner waits, woken by the release instead of polling;
//! then what a lease cannot do, the articles' slow business: the work
//! outlives the lease, and the owner's release finds the lock gone.
//!
//!     cargo run -p stocklock-lock --example lease -- --redis-url redis://127.0.0.1:PORT
//!
//! (`stocklock up` prints the URL of its Redis.) Exits 1 if the lock does
//! not behave as described.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::Parser;
use stocklock_lock::store::Store;
use stocklock_lock::{LeaseLock, OwnerId, Wakeups};

#[derive(Parser)]
struct Args {
    /// The Redis to lock on.
    #[arg(long, env = "STOCKLOCK_REDIS_URL")]
    redis_url: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let store = Store::open(&args.redis_url)?;
    // One listener per process: it wakes this process's waiters when a
    // lock they wait on is released.
    let wakeups = Wakeups::new();
    let _listener = wakeups.listen(store.client().clone());
    wakeups.subscribed().await;
    let lock = LeaseLock::new(store.conn().await?, "example:lease:{order-42}", wakeups);
    let (alice, bob) = (OwnerId::new("alice"), OwnerId::new("bob"));
    let lease = Duration::from_secs(5);

    let grant = lock
        .lock(&alice, lease, Duration::ZERO)
        .await?
        .context("the lock is held by someone else: is another example running?")?;
    println!(
        "alice holds {} until {:?} from now",
        lock.key(),
        grant.deadline() - Instant::now()
    );
    ensure!(!lock.try_lock(&bob, lease).await?, "bob took a held lock");
    println!("bob: held, waits (up to 3 s) to be woken by the release");

    let waiter = {
        let (lock, bob) = (lock.clone(), bob.clone());
        tokio::spawn(async move { lock.lock(&bob, lease, Duration::from_secs(3)).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await; // alice's work
    let released_at = Instant::now();
    ensure!(
        lock.unlock(&alice).await?,
        "alice's release found the lock gone"
    );
    let bobs = waiter.await??.context("bob was never woken")?;
    println!(
        "bob holds it {:.2} ms after alice's release (token {:?})",
        released_at.elapsed().as_secs_f64() * 1e3,
        bobs.token
    );
    ensure!(!lock.unlock(&alice).await?, "alice released bob's lock");
    ensure!(lock.unlock(&bob).await?, "bob could not release");

    // Slow business: the work takes longer than the lease.
    let short = Duration::from_millis(300);
    let grant = lock
        .lock(&alice, short, Duration::ZERO)
        .await?
        .context("free")?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    ensure!(
        Instant::now() > grant.deadline(),
        "the deadline did not pass"
    );
    ensure!(
        lock.try_lock(&bob, lease).await?,
        "bob could not take the lock after alice's lease ran out"
    );
    let still_mine = lock.unlock(&alice).await?;
    ensure!(!still_mine, "alice released a lock that was bob's");
    println!(
        "slow business: alice's lease ran out mid-work, bob took the lock, and alice's release \
         left it to him (the owner token). Alice's write would now race bob's: \
         the watchdog and fencing examples are the answers."
    );
    lock.unlock(&bob).await?;
    Ok(())
}
