//! Redlock: one lock on a majority of N independent Redis servers.
//!
//!     cargo run -p stocklock-lock --features redlock --example redlock -- --nodes redis://127.0.0.1:P1,redis://127.0.0.1:P2,...
//!
//! (`stocklock up` starts five and prints them as "redlock node N".) Takes
//! the lock, shows a second owner refused while it is held, renews it with
//! a watchdog, and releases it everywhere. Exits 1 if it does not behave as
//! described.

use std::time::Duration;

use anyhow::{bail, ensure};
use clap::Parser;
use stocklock_lock::{OwnerId, RedlockNodes, Refused, Watchdog};

#[derive(Parser)]
struct Args {
    /// The Redlock nodes, comma-separated (an odd number, 3 or more).
    #[arg(long, value_delimiter = ',', required = true)]
    nodes: Vec<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let nodes = RedlockNodes::open(&args.nodes)?;
    let lock = nodes.lock("example:redlock:{order-42}");
    let (alice, bob) = (OwnerId::new("alice"), OwnerId::new("bob"));
    let lease = Duration::from_millis(900);

    let grant = match lock.lock(&alice, lease, Duration::from_secs(2)).await? {
        Ok(grant) => grant,
        Err(Refused::Held) => bail!("the lock stayed held by someone else"),
        Err(Refused::NoQuorum { answered, quorum }) => {
            bail!("only {answered} nodes answered; a majority is {quorum}")
        }
    };
    println!(
        "alice holds it on a majority of {} nodes (quorum {})",
        nodes.len(),
        lock.quorum()
    );
    ensure!(
        lock.lock(&bob, lease, Duration::ZERO).await? == Err(Refused::Held),
        "bob took a held lock"
    );

    // Renewed on every node while held; lost when a majority stops agreeing.
    let dog = Watchdog::for_grant(lock.clone(), alice.clone(), &grant);
    tokio::time::sleep(lease * 2).await;
    ensure!(
        !dog.tenure().is_lost(),
        "the lease ran out under the watchdog"
    );
    println!(
        "held for {:?} on a {:?} lease: {} renewals",
        lease * 2,
        lease,
        dog.tenure().renewals()
    );
    dog.stop();
    let released = lock.unlock(&alice).await;
    ensure!(
        released >= lock.quorum(),
        "released on {released} nodes only"
    );
    println!("released on {released} nodes");
    Ok(())
}
