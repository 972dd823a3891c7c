//! The reentrant lock with a watchdog: work three times longer than the
//! lease while the watchdog renews it, then learn that the lease was lost
//! (the key deleted under the holder, as a failover would), and release.
//!
//!     cargo run -p stocklock-lock --example watchdog -- --redis-url redis://127.0.0.1:PORT
//!
//! Exits 1 if the lock does not behave as described.

use std::time::Duration;

use anyhow::{Context, ensure};
use clap::Parser;
use redis::AsyncCommands;
use stocklock_lock::store::Store;
use stocklock_lock::{OwnerId, ReentrantLock, Unlocked, Wakeups, Watchdog};

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
    let wakeups = Wakeups::new();
    let _listener = wakeups.listen(store.client().clone());
    let key = "example:watchdog:{order-42}";
    let lock = ReentrantLock::new(store.conn().await?, key, wakeups);
    let me = OwnerId::new("worker-1");
    let lease = Duration::from_millis(600);

    let grant = lock
        .lock(&me, lease, Duration::from_secs(2))
        .await?
        .context("the lock stayed held by someone else")?;
    // Reentrant: the owner may take it again (a hold count, not a deadlock).
    let again = lock
        .lock(&me, lease, Duration::ZERO)
        .await?
        .context("reentry")?;
    ensure!(again.holds == 2, "holds {}", again.holds);
    ensure!(lock.unlock(&me, lease).await? == Unlocked::StillHeld(1));

    // Renewed every lease/3 while held; the deadline moves only with
    // renewals Redis confirmed.
    let dog = Watchdog::for_grant(lock.clone(), me.clone(), &grant);
    tokio::time::sleep(lease * 3).await; // the work
    ensure!(
        !dog.tenure().is_lost(),
        "the lease ran out under the watchdog"
    );
    println!(
        "worked {:?} on a {:?} lease: {} renewals, still held",
        lease * 3,
        lease,
        dog.tenure().renewals()
    );

    // The lock vanishes under its holder (a failover to a replica that
    // never saw it): the next renewal is refused and the tenure says so.
    let _: () = store.conn().await?.del(key).await?;
    tokio::time::timeout(lease * 2, dog.tenure().lost())
        .await
        .context("the holder was never told its lock was lost")?;
    println!("the key was deleted: the holder learns its lease is lost, and must not write");
    dog.stop();
    ensure!(
        lock.unlock_all(&me).await? == Unlocked::NotOwner,
        "released a lock it no longer held"
    );
    Ok(())
}
