//! The etcd lock (etcd's own recipe: a lease kept alive by its session, a
//! queue ordered by `create_revision`, each waiter watching its
//! predecessor): a second owner refused at once, then woken by the
//! release; the holder working past its lease's TTL while its session
//! keeps the lease alive; a fencing token that grows from one holder to
//! the next; and a holder that dies without releasing, whose lock etcd
//! frees when its lease runs out.
//!
//!     cargo run -p stocklock-lock --features etcd --example etcd -- --etcd-endpoints http://127.0.0.1:P1,http://127.0.0.1:P2,...
//!
//! (`stocklock up` starts three members and prints them as "etcd member
//! N".) Exits 1 if the lock does not behave as described.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::Parser;
use stocklock_lock::Error as LockError;
use stocklock_lock::etcd::{EtcdClient, EtcdLock, Session};

#[derive(Parser)]
struct Args {
    /// The client URLs of the etcd members, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        required = true,
        env = "STOCKLOCK_ETCD_ENDPOINTS"
    )]
    etcd_endpoints: Vec<String>,
}

/// Waits until `n` contenders (the holder included) have queued their keys.
async fn until_queued(lock: &EtcdLock, n: u64) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while lock.contenders().await? < n {
        ensure!(Instant::now() < deadline, "{n} contenders never queued");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let client = EtcdClient::new(args.etcd_endpoints)?;
    let lock = EtcdLock::new(client.clone(), "example/etcd/order-42");
    // etcd counts leases in whole seconds, and raises a short one to its
    // own minimum: the TTL it granted is the one to count with.
    let alice = Session::grant(&client, Duration::from_secs(1)).await?;
    let ttl = alice.ttl();

    let hers = lock
        .lock(&alice, Duration::from_secs(5))
        .await
        .context("the lock stayed held by someone else: is another example running?")?;
    println!(
        "alice holds {} (fencing token {}, lease TTL {ttl:?})",
        hers.key, hers.token
    );
    let bob = Session::grant(&client, ttl).await?;
    ensure!(
        matches!(lock.lock(&bob, Duration::ZERO).await, Err(LockError::Busy)),
        "bob took a held lock"
    );
    println!("bob: held, queues and watches alice's key");

    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move {
            let his = lock.lock(&bob, Duration::from_secs(30)).await;
            (his, Instant::now(), bob)
        })
    };
    until_queued(&lock, 2).await?;
    // Alice works for longer than her lease: her session's keep-alives
    // (every third of the TTL) carry it.
    tokio::time::sleep(ttl * 3 / 2).await;
    ensure!(!alice.is_lost(), "alice's lease ran out under her session");
    ensure!(alice.renewals() > 0, "no keep-alive was confirmed");
    let holder = lock.holder().await?.context("nobody holds the lock")?;
    ensure!(holder.key == hers.key, "{} took alice's lock", holder.key);
    println!(
        "alice worked {:?} on a {ttl:?} lease: {} keep-alives, still held",
        ttl * 3 / 2,
        alice.renewals()
    );

    let released_at = Instant::now();
    lock.release(&hers, alice).await?;
    let (his, granted_at, bob) = waiter.await?;
    let his = his.context("bob was never woken")?;
    ensure!(
        his.token > hers.token,
        "tokens {} then {}",
        hers.token,
        his.token
    );
    println!(
        "bob holds it {:.2} ms after alice's release (fencing token {})",
        granted_at.duration_since(released_at).as_secs_f64() * 1e3,
        his.token
    );

    // Bob dies holding the lock: no release, no more keep-alives. etcd
    // deletes his key when his lease runs out, on the cluster's clock.
    let his_lease = bob.lease();
    bob.abandon();
    let died_at = Instant::now();
    let carol = Session::grant(&client, Duration::from_secs(10)).await?;
    let hers_now = lock
        .lock(&carol, ttl + Duration::from_secs(10))
        .await
        .context("carol never got the lock bob left behind")?;
    let freed_after = died_at.elapsed();
    ensure!(
        lock.lease_left(his_lease).await?.is_none(),
        "carol got the lock while bob's lease lived"
    );
    ensure!(
        hers_now.token > his.token,
        "tokens {} then {}",
        his.token,
        hers_now.token
    );
    println!(
        "bob died holding it; etcd freed it with his lease, and carol holds it {:.2} ms \
         later (fencing token {})",
        freed_after.as_secs_f64() * 1e3,
        hers_now.token
    );
    lock.release(&hers_now, carol).await?;
    Ok(())
}
