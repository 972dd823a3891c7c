//! The ZooKeeper lock (the classic recipe: an ephemeral sequential znode
//! per contender, the lowest holds the lock, each waiter watches its
//! predecessor, the session is the lease, the znode's `czxid` the fencing
//! token): a second owner refused at once, then woken by the release; the
//! holder refused a second hold (the recipe is not reentrant); and a
//! holder whose process exits without releasing, whose lock is freed at
//! once because its session closes.
//!
//!     cargo run -p stocklock-lock --features zookeeper --example zookeeper -- --zookeeper 127.0.0.1:PORT
//!
//! (`stocklock up` starts one server and prints it as "zookeeper 1".)
//! Exits 1 if the lock does not behave as described.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use clap::Parser;
use stocklock_lock::{ZooKeeperLock, ZooKeeperSession};
use zookeeper_client as zk;

#[derive(Parser)]
struct Args {
    /// The ZooKeeper connect string (`host:port,host:port`).
    #[arg(long, env = "STOCKLOCK_ZOOKEEPER")]
    zookeeper: String,
}

/// The lock's name: ZooKeeper paths take letters, digits, `-_.:`.
const NAME: &str = "example:zookeeper:order-42";
/// Every session's timeout: the lease of the locks taken through it.
const SESSION: Duration = Duration::from_secs(10);

async fn session(connect: &str) -> anyhow::Result<ZooKeeperSession> {
    ZooKeeperSession::connect(connect, SESSION, Duration::from_secs(10))
        .await
        .with_context(|| format!("cannot reach ZooKeeper at {connect}"))
}

/// Waits until `n` contenders' znodes are queued under the lock, watching
/// the lock's directory from a session of its own.
async fn until_queued(watcher: &zk::Client, lock: &ZooKeeperLock, n: usize) -> anyhow::Result<()> {
    let wait = async {
        loop {
            let (children, changed) = watcher.list_and_watch_children(lock.dir()).await?;
            if children.len() >= n {
                return Ok::<_, zk::Error>(());
            }
            changed.changed().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), wait)
        .await
        .context("the waiter never queued")??;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let watcher = zk::Client::connect(&args.zookeeper).await?;
    let (alice, bob) = (
        session(&args.zookeeper).await?,
        session(&args.zookeeper).await?,
    );
    let (her_lock, his_lock) = (alice.lock(NAME)?, bob.lock(NAME)?);

    let hers = her_lock
        .lock(Duration::ZERO)
        .await?
        .context("the lock is held by someone else: is another example running?")?;
    println!(
        "alice holds {} (fencing token: czxid {})",
        hers.path, hers.token
    );
    ensure!(
        his_lock.lock(Duration::ZERO).await?.is_none(),
        "bob took a held lock"
    );
    // Not reentrant: a second hold by alice queues behind her own znode.
    ensure!(
        her_lock.lock(Duration::ZERO).await?.is_none(),
        "alice held the lock twice"
    );
    println!("bob: held; alice's second lock: refused too (the recipe is not reentrant)");

    let waiter = {
        let his_lock = his_lock.clone();
        tokio::spawn(async move {
            let his = his_lock.lock(Duration::from_secs(30)).await;
            (his, Instant::now())
        })
    };
    until_queued(&watcher, &her_lock, 2).await?;
    let released_at = Instant::now();
    ensure!(
        her_lock.unlock(&hers).await?,
        "alice's znode was gone before her release"
    );
    let (his, granted_at) = waiter.await?;
    let his = his?.context("bob was never woken")?;
    ensure!(
        his.token > hers.token,
        "tokens {} then {}",
        hers.token,
        his.token
    );
    println!(
        "bob holds it {:.2} ms after alice's release (fencing token: czxid {})",
        granted_at.duration_since(released_at).as_secs_f64() * 1e3,
        his.token
    );

    // Bob's process exits holding the lock: its session closes, and the
    // server deletes his znode at once, long before the session timeout.
    let carol = session(&args.zookeeper).await?;
    let her_new_lock = carol.lock(NAME)?;
    let waiter = {
        let her_new_lock = her_new_lock.clone();
        tokio::spawn(async move { her_new_lock.lock(Duration::from_secs(30)).await })
    };
    until_queued(&watcher, &her_new_lock, 2).await?;
    let exited_at = Instant::now();
    drop((his_lock, bob));
    let hers_now = waiter.await??.context("carol never got bob's lock")?;
    let freed_after = exited_at.elapsed();
    ensure!(
        freed_after < SESSION,
        "freed after {freed_after:?}: by the session's expiry, not its close"
    );
    ensure!(
        hers_now.token > his.token,
        "tokens {} then {}",
        his.token,
        hers_now.token
    );
    println!(
        "bob exited holding it; his session closed, and carol holds it {:.2} ms \
         later (fencing token: czxid {})",
        freed_after.as_secs_f64() * 1e3,
        hers_now.token
    );
    ensure!(her_new_lock.unlock(&hers_now).await?, "carol's release");
    Ok(())
}
