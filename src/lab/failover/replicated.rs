//! The Redis cells of the failover scenarios, on `up --replica`: the
//! replica replicates through a relay the lab holds back (SIGSTOP) before
//! or after the holder's `WAIT`, and kills with the master; Sentinel
//! promotes the replica.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::query;
use crate::gate::{Scheduler, buyer_name, points};
use crate::harness::failover::{kill_master, serving_again};
use crate::judge::{Check, Failover, Replication, Reply, check, said_of};
use crate::knobs::Sku;
use crate::lab::Lab;
use crate::said;
use crate::store::{Keys, Store};
use crate::up::relay;
use crate::variants::Variant;

/// `failover-wait-early`: how long the holder would work (it never
/// enters its section: its `WAIT` sees no replica).
const REDIS_WORK: Duration = Duration::from_millis(6_000);
/// `failover-wait`: the holder's lease. It outlives the holder's stay at
/// its gate and the promotion (about 2.2 s): the replicated lock is still
/// there on the new master.
const AFTER_WAIT_LEASE: Duration = Duration::from_millis(5_000);
/// `failover-wait`: how long the newcomer waits for the holder's lock on
/// the new master, longer than its whole lease.
const AFTER_WAIT_NEWCOMER_WAIT: Duration = Duration::from_millis(10_000);
/// How long a held holder may take to reach its gate before its write.
const GATE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a failover of the `--replica` stack's Redis needs: the relay to
/// hold back and kill, the Sentinels to ask, the master to kill.
struct Replicated {
    relay: u32,
    sentinels: Vec<String>,
    master: SocketAddr,
}

impl Replicated {
    fn of(lab: &Lab) -> anyhow::Result<Self> {
        let relay = lab
            .stack
            .relay
            .as_ref()
            .context("up --replica announced no relay")?;
        Ok(Replicated {
            relay: relay.pid,
            sentinels: lab.stack.sentinel_addrs(),
            master: lab
                .redis_url
                .trim_start_matches("redis://")
                .parse()
                .context("the master's address")?,
        })
    }

    /// Kills the master and the relay, and waits for the promotion
    /// ([`kill_master`]); the lab then works on the new master. Its URL,
    /// and how long the promotion took from the kill.
    async fn fail_over(&self, lab: &mut Lab) -> anyhow::Result<(String, Duration)> {
        let master_pid = lab.stack.redis_pid.unwrap_or(0);
        let (promoted, promotion) =
            kill_master((master_pid, self.relay), &self.sentinels, self.master).await?;
        lab.store = Store::open(&promoted)?;
        lab.redis_url = promoted.clone();
        Ok((promoted, promotion))
    }
}

/// Resets `v` (stock 5) on the master and returns once the replica has
/// acknowledged it (`WAIT 1`).
async fn reset_replicated(lab: &Lab, v: &str) -> anyhow::Result<()> {
    lab.client().reset(v, 5, 0).await?;
    let mut master = lab.store.conn().await?;
    let replicated = crate::store::wait_replicas(&mut master, 1, Duration::from_secs(5)).await?;
    if replicated < 1 {
        bail!("the replica did not acknowledge the reset within 5 s");
    }
    Ok(())
}

/// The Redis cells of `failover` and `failover-wait-early`: replication is
/// held back before the holder takes its lock, so the lock never reaches
/// the replica. `failover`: the holder is held at its gate before its
/// write (on the Redis `gates`, apart), having read the stock; the master
/// dies, the newcomer buys on the new master, and only then is the holder
/// let go to write what it read. `failover-wait-early`: the holder asks
/// `WAIT` for one replica after taking its lock, sees none and answers
/// first; then the master dies and the newcomer buys.
pub(super) async fn master_dies(
    lab: &mut Lab,
    variant: Variant,
    replication: Replication,
    gates: &str,
) -> anyhow::Result<Failover> {
    let v = variant.name();
    let set = Replicated::of(lab)?;
    reset_replicated(lab, v).await?;
    relay::hold(set.relay).await?;

    let wait = replication == Replication::HeldBeforeWait;
    let holder_sent = Instant::now();
    let (mut holder_task, held) = if wait {
        let knobs = format!(
            "lease_ms=30000&work_ms={}&wait_ms=0&replicas=1",
            REDIS_WORK.as_millis()
        );
        (lab.send(&lab.instance(0).url, &query(v, &knobs)), None)
    } else {
        let run = format!("lab-failover-{v}-{}", std::process::id());
        let scheduler = Scheduler::start(gates, &run).await?;
        let knobs = format!(
            "lease_ms=30000&work_ms=0&wait_ms=0&schedule={run}:{}",
            buyer_name(0)
        );
        (
            lab.send(&lab.instance(0).url, &query(v, &knobs)),
            Some(scheduler),
        )
    };
    // With WAIT the holder never enters its section: its answer comes
    // first. Without, it waits at its write.
    let (early, at_write) = match held {
        None => (Some((&mut holder_task).await?), None),
        Some(mut scheduler) => {
            let arrival = scheduler
                .run_to(points::BEFORE_WRITE.name, GATE_TIMEOUT)
                .await?;
            (None, Some((scheduler, arrival)))
        }
    };
    let in_section = at_write
        .as_ref()
        .is_some_and(|(_, arrival)| arrival.is_some());

    let (promoted, promotion) = set.fail_over(lab).await?;
    let (newcomer_sent, newcomer) =
        newcomer_after_failover(lab, v, "lease_ms=30000&work_ms=0&wait_ms=5000").await?;
    if let Some((mut scheduler, arrival)) = at_write {
        if let Some(arrival) = &arrival {
            scheduler.release(arrival).await?;
        }
        scheduler.abandon().await?;
    }
    let holder = match early {
        Some(reply) => reply,
        None => holder_task.await?,
    };
    let newcomer_after_holder = newcomer_sent + newcomer.took > holder_sent + holder.took;
    let landed = if wait {
        check(holder.refused("not_replicated") || holder.sold(), || {
            said_of!(
                "the holder answered {}: it never took the lock",
                "持有者应答 {}:它从未拿到锁";
                holder.answer_said()
            )
        })
    } else {
        check(in_section, || {
            said!(
                "the holder never reached its write before the master died",
                "主节点死掉之前,持有者从未到达写入处"
            )
        })
    };
    let ledger = lab.ledger(v).await?;
    let when = if wait {
        said!("once the holder had answered", "在持有者应答之后")
    } else {
        said!(
            "while the holder waited at its gate before its write, the stock read",
            "此时持有者已读过库存,正在写入前的闸门处等待"
        )
    };
    let (master, secs) = (set.master, promotion.as_secs_f64());
    Ok(Failover {
        fault: said_of!(
            "replication held back, master {master} killed {}; Sentinel promoted {promoted} after {secs:.2} s",
            "复制被挡住,主节点 {master} 被杀死({});{secs:.2} s 后哨兵把 {promoted} 提升为主节点";
            when
        ),
        landed,
        holder,
        newcomer,
        newcomer_after_holder,
        replication,
        ledger,
    })
}

/// The Redis cell of `failover-wait`, the worst moment for `WAIT`: the
/// holder's lock reaches the replica (its `WAIT 1` succeeds), then
/// replication is held back, so its sale does not; the master dies after
/// the holder answered, the replica is promoted with the holder's lock and
/// the stock as it was before the sale, and the newcomer, once that lock's
/// lease ran out, sells the same unit again.
pub(super) async fn write_lost(
    lab: &mut Lab,
    variant: Variant,
    gates: &str,
) -> anyhow::Result<Failover> {
    let v = variant.name();
    let set = Replicated::of(lab)?;
    let replica = lab
        .stack
        .replica
        .clone()
        .context("up --replica announced no replica")?;
    reset_replicated(lab, v).await?;

    let run = format!("lab-failover-wait-{v}-{}", std::process::id());
    let mut scheduler = Scheduler::start(gates, &run).await?;
    let holder_sent = Instant::now();
    let holder_task = lab.send(
        &lab.instance(0).url,
        &query(
            v,
            &format!(
                "lease_ms={}&work_ms=0&wait_ms=0&replicas=1&schedule={run}:{}",
                AFTER_WAIT_LEASE.as_millis(),
                buyer_name(0)
            ),
        ),
    );
    // The holder reaches its write only after its WAIT succeeded; a holder
    // whose WAIT saw no replica answers without getting there.
    let at_write = scheduler
        .run_to(points::BEFORE_WRITE.name, GATE_TIMEOUT)
        .await?;
    let in_section = at_write.is_some();
    let on_replica = if in_section {
        lock_on(&replica.url, v).await?
    } else {
        None
    };
    // From here on nothing the master writes reaches the replica: the
    // holder's sale and its release stay on the master.
    relay::hold(set.relay).await?;
    if let Some(arrival) = &at_write {
        scheduler.release(arrival).await?;
    }
    scheduler.abandon().await?;
    let holder = holder_task.await?;

    let (promoted, promotion) = set.fail_over(lab).await?;
    // What the failover kept of the holder's lock, read on the new master.
    let kept = lock_on(&promoted, v).await?;
    let knobs = format!(
        "lease_ms={}&work_ms=0&wait_ms={}",
        AFTER_WAIT_LEASE.as_millis(),
        AFTER_WAIT_NEWCOMER_WAIT.as_millis()
    );
    let (newcomer_sent, newcomer) = newcomer_after_failover(lab, v, &knobs).await?;
    let newcomer_after_holder = newcomer_sent + newcomer.took > holder_sent + holder.took;
    let landed: Check = check(in_section, || {
        said_of!(
            "the holder never reached its write (it answered {})",
            "持有者从未到达写入处(它应答 {})";
            holder.answer_said()
        )
    })
    .and_then(|()| {
        check(on_replica.is_some(), || {
            said!(
                "the holder's lock was not on the replica when replication was held back",
                "复制被挡住时,持有者的锁不在副本上"
            )
        })
    });
    let seen = match on_replica {
        Some(ttl) => said!(
            "its lock was read on the replica with {ttl} ms left",
            "在副本上读到了它的锁,还剩 {ttl} ms"
        ),
        None => said!("its lock was not on the replica", "它的锁不在副本上"),
    };
    let kept = match kept {
        Some(ttl) => said!(
            "the holder's lock was on the new master with {ttl} ms left",
            "持有者的锁在新主节点上,还剩 {ttl} ms"
        ),
        None => said!(
            "the holder's lock was gone from the new master",
            "持有者的锁在新主节点上已经不见了"
        ),
    };
    let ledger = lab.ledger(v).await?;
    let (master, secs) = (set.master, promotion.as_secs_f64());
    Ok(Failover {
        fault: said_of!(
            "the holder's WAIT 1 succeeded (it reached its write) and {}; replication then held back while it waited at its gate, before its write; master {master} killed once the holder had answered; Sentinel promoted {promoted} after {secs:.2} s; {}",
            "持有者的 WAIT 1 成功了(它到达了写入处),并且{};随后在它于写入前的闸门处等待时挡住复制;持有者应答之后,主节点 {master} 被杀死;{secs:.2} s 后哨兵把 {promoted} 提升为主节点;{}";
            seen,
            kept
        ),
        landed,
        holder,
        newcomer,
        newcomer_after_holder,
        replication: Replication::HeldAfterWait,
        ledger,
    })
}

/// `v`'s lock on the Redis at `url` (a replica answers reads): how many
/// ms its lease has left, `None` when there is no lock (or no lease).
async fn lock_on(url: &str, v: &str) -> anyhow::Result<Option<i64>> {
    let client = redis::Client::open(url)?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .with_context(|| format!("cannot reach {url}"))?;
    let lock = Keys::new(&Sku::parse(v)?).lock;
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&lock)
        .query_async(&mut conn)
        .await
        .with_context(|| format!("PTTL {lock} on {url}"))?;
    Ok((ttl > 0).then_some(ttl))
}

/// Once both instances found the new master through the Sentinels, a
/// newcomer buys on instance b with `knobs` (no WAIT: the new master has no
/// replica of its own left to wait for); when it was sent, and its answer.
async fn newcomer_after_failover(
    lab: &Lab,
    v: &str,
    knobs: &str,
) -> anyhow::Result<(Instant, Reply)> {
    for index in [1, 0] {
        let instance = lab.instance(index);
        serving_again(&lab.client().at(&instance.url), &instance.name, v).await?;
    }
    let sent = Instant::now();
    let newcomer = lab.send(&lab.instance(1).url, &query(v, knobs)).await?;
    Ok((sent, newcomer))
}
