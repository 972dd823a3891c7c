//! What each scenario does to the stack, and the evidence it hands its
//! judge.

use std::time::{Duration, Instant};

use futures_util::FutureExt;

use crate::harness::stack::Instance;
use crate::judge::{self, Duel, Judgement, MajorityDown, Recovery, Reply, said_of};
use crate::lab::Lab;
use crate::load::engine::Progress;
use crate::load::{LoadConfig, Runner};
use crate::os::signal;
use crate::said;
use crate::up::redis::RedisServer;
use crate::variants::Variant;
use crate::wire::{ChaosAction, StateSnapshot};

/// The lease of the recovery scenarios; "frees" is a sale within it + 1 s.
const RECOVERY_LEASE: Duration = Duration::from_millis(1_000);
const RECOVERY_WINDOW: Duration = Duration::from_millis(2_000);
/// How long `pause-holder` freezes its holder, and its lease.
const PAUSE: Duration = Duration::from_millis(1_500);
pub(super) const HOLDER_LEASE: Duration = Duration::from_millis(300);
/// How far ahead instance b's clock runs in `clock-skew`.
const SKEW_MS: i64 = 5_000;
/// How long the holder of `redlock-restart-without-persistence` is frozen.
const FROZEN: Duration = Duration::from_millis(4_000);

/// The shortest lease `v`'s store grants. etcd counts leases in whole
/// seconds, one at least (under `up`'s election timeout), and revokes the
/// expired ones every 500 ms: its scenarios scale to that.
fn shortest_lease(v: &str) -> Duration {
    if v == Variant::Etcd.name() {
        Duration::from_secs(1)
    } else {
        Duration::ZERO
    }
}

/// How long `pause-holder` freezes `v`'s holder: [`PAUSE`], or longer than
/// the shortest lease its store grants, plus the 500 ms etcd may take to
/// revoke it, plus one second.
fn pause_for(v: &str) -> Duration {
    PAUSE.max(shortest_lease(v) + Duration::from_millis(1_500))
}

pub(super) fn query(v: &str, knobs: &str) -> String {
    format!("/deductStock/{v}?sku={v}&{knobs}")
}

/// The chaos action that deletes `sku`'s lock key now.
pub(super) fn vanish(sku: &str) -> ChaosAction {
    ChaosAction::LockVanishes {
        sku: sku.to_owned(),
    }
}

/// The race sent to instance a only: one process.
pub(super) async fn one_instance(lab: &Lab, variant: Variant) -> anyhow::Result<Judgement> {
    let state = race_load(lab, &lab.instance(0).url, variant).await?;
    Ok(judge::one_instance(
        &lab.ledger_of(state).await?,
        variant.about().undersells.as_ref(),
    ))
}

/// Two instances, 400 buyers, 64 at once, `work_ms=2`, stock 50.
pub(super) async fn race(lab: &Lab, variant: Variant) -> anyhow::Result<Judgement> {
    let state = race_load(lab, &lab.stack.url, variant).await?;
    Ok(judge::race(
        &lab.ledger_of(state).await?,
        variant.about().undersells.as_ref(),
    ))
}

/// The race's load, sent to `url` (nginx, or one instance); the SKU's
/// state after it.
async fn race_load(lab: &Lab, url: &str, variant: Variant) -> anyhow::Result<StateSnapshot> {
    let sku = lab.sku(variant.name());
    let config = LoadConfig {
        variants: vec![variant.name().to_owned()],
        sku: Some(sku.clone()),
        stock: Some(50),
        requests: Some(400),
        work_ms: Some(2),
        timeout: Duration::from_secs(60),
        ..LoadConfig::new(url, Some(lab.stack.token.clone()))
    };
    let mut runner = Runner::connect(config).await?;
    if let Some(recorder) = lab.client().recorder() {
        runner = runner.recording(recorder.clone());
    }
    runner
        .run_variant(&variant.info(), &Progress::default())
        .await?;
    lab.state(&sku).await
}

/// Three buyers, work 600 ms, lease 200 ms, each waiting up to 5 s (a
/// store whose leases are longer: work three leases long, waits 15 s).
pub(super) async fn slow_business(lab: &Lab, v: &str) -> anyhow::Result<Judgement> {
    let sku = lab.sku(v);
    lab.client().reset(&sku, 5, 0).await?;
    let lease = shortest_lease(v)
        .max(Duration::from_millis(200))
        .as_millis();
    let (work, wait) = (3 * lease, 25 * lease);
    let knobs = format!("sku={sku}&lease_ms={lease}&work_ms={work}&wait_ms={wait}");
    lab.crowd(3, &format!("/deductStock/{v}?{knobs}")).await?;
    // A lock without a lease (the database's) must hold through the work.
    let variant: Variant = v.parse().map_err(|_| anyhow::anyhow!("no variant {v}"))?;
    let leaseless = variant.stock_in_postgres().then_some(lease as u64);
    Ok(judge::slow_business(&lab.ledger(&sku).await?, leaseless))
}

/// After a holder died: a buyer on `other`, waiting up to the recovery
/// window for the lock.
async fn next_buyer(lab: &Lab, v: &str, other: &Instance) -> anyhow::Result<Reply> {
    let knobs = format!(
        "lease_ms={}&wait_ms={}",
        RECOVERY_LEASE.as_millis(),
        RECOVERY_WINDOW.as_millis()
    );
    Ok(lab.send(&other.url, &query(v, &knobs)).await?)
}

/// The holder crashes right after taking its lock (lease 1 s): setnx
/// between SETNX and EXPIRE, the others inside their section. Then a buyer
/// on the other instance waits up to lease + 1 s.
pub(super) async fn crash_after_acquire(lab: &mut Lab, v: &str) -> anyhow::Result<Judgement> {
    lab.client().reset(v, 5, 0).await?;
    let (victim, other) = lab.next_victim();
    let entered = lab.section_entered(v).await?;
    lab.client().chaos(&ChaosAction::CrashAfterAcquire).await?;
    let lease_ms = RECOVERY_LEASE.as_millis();
    let crashing = lab
        .send(
            &victim.url,
            &query(v, &format!("lease_ms={lease_ms}&wait_ms=0")),
        )
        .await?;
    // The window opens as the crash drops the crashing request's connection.
    let next = next_buyer(lab, v, &other).await?;
    // An announcement, if there was one, came before the crash: a whole
    // window ago.
    let announced = entered.now_or_never().unwrap_or(false);
    let restarted = lab.restarted(&victim).await;
    let lock = lab.state(v).await?.lock;
    let held = if announced {
        Some(Recovery::announced())
    } else if lock.held && lock.no_ttl {
        Some(said!(
            "its lock left with no TTL (it died before its section)",
            "它的锁留了下来,没有 TTL(它死在进入临界区之前)"
        ))
    } else {
        None
    };
    if lock.no_ttl {
        // Nothing else will ever free it.
        lab.client().chaos(&vanish(v)).await?;
    }
    let (name, pid) = (&victim.name, victim.pid);
    Ok(judge::recovery(&Recovery {
        death: said_of!(
            "instance {name} (pid {pid}) crashed as armed (its request: {})",
            "实例 {name}(PID {pid})按预设崩溃(它的请求:{})";
            crashing.answer_said()
        ),
        held,
        restarted,
        next,
        window: RECOVERY_WINDOW,
        lock,
    }))
}

/// The holder's instance is killed (SIGKILL) mid-work (lease 1 s); a buyer
/// on the other instance waits up to lease + 1 s.
pub(super) async fn kill_instance(lab: &mut Lab, v: &str) -> anyhow::Result<Judgement> {
    lab.client().reset(v, 5, 0).await?;
    let (victim, other) = lab.next_victim();
    let lease_ms = RECOVERY_LEASE.as_millis();
    let entered = lab.section_entered(v).await?;
    let _holder = lab.send(
        &victim.url,
        &query(v, &format!("lease_ms={lease_ms}&work_ms=20000&wait_ms=0")),
    );
    let held = entered.await;
    signal(victim.pid, nix::sys::signal::Signal::SIGKILL);
    let next = next_buyer(lab, v, &other).await?;
    let restarted = lab.restarted(&victim).await;
    let lock = lab.state(v).await?.lock;
    let (name, pid) = (&victim.name, victim.pid);
    Ok(judge::recovery(&Recovery {
        death: said!(
            "instance {name} (pid {pid}) killed with SIGKILL",
            "实例 {name}(PID {pid})被 SIGKILL 杀死"
        ),
        held: held.then(Recovery::announced),
        restarted,
        next,
        window: RECOVERY_WINDOW,
        lock,
    }))
}

/// The holder on instance a freezes for 1.5 s, with a 300 ms lease, after
/// its last check of the lock and right before its write; a buyer on
/// instance b waits for the lock. (A database lock's cell is
/// [`super::database::silent_holder`].)
pub(super) async fn pause_holder(lab: &Lab, v: &str) -> anyhow::Result<Judgement> {
    let (duel, pause) = frozen_holder(lab, v).await?;
    Ok(judge::pause_holder(&duel, pause, None))
}

/// `pause-holder`'s duel: the holder frozen, and how long.
pub(super) async fn frozen_holder(lab: &Lab, v: &str) -> anyhow::Result<(Duel, Duration)> {
    lab.client().reset(v, 5, 0).await?;
    let pause = pause_for(v);
    lab.client()
        .chaos(&ChaosAction::PauseHolder {
            ms: pause.as_millis() as u64,
        })
        .await?;
    let buyer = holder_query(v);
    let (duel, _) = lab.duel(v, &buyer, &buyer, None).await?;
    Ok((duel, pause))
}

/// What `pause-holder`'s holder and newcomer ask.
pub(super) fn holder_query(v: &str) -> String {
    let lease = HOLDER_LEASE.as_millis();
    query(v, &format!("lease_ms={lease}&work_ms=0&wait_ms=5000"))
}

/// Sixteen concurrent retries of one request_id through nginx.
pub(super) async fn retry_storm(lab: &Lab, v: &str) -> anyhow::Result<Judgement> {
    lab.client().reset(v, 5, 0).await?;
    let retries = lab
        .crowd(16, &query(v, "request_id=storm-1&work_ms=20&wait_ms=5000"))
        .await?;
    Ok(judge::retry_storm(&retries, &lab.ledger(v).await?))
}

/// A holder on instance a (true clock); a buyer on instance b, whose clock
/// the lab sets 5 s ahead (the runner sets it back after the cell), while
/// the lock still has 2 s to live.
pub(super) async fn clock_skew(lab: &Lab, v: &str) -> anyhow::Result<Judgement> {
    lab.client().reset(v, 5, 0).await?;
    let skewed = lab
        .chaos_on(1, &ChaosAction::ClockSkew { ms: SKEW_MS })
        .await?;
    let (duel, _) = lab
        .duel(
            v,
            &query(v, "lease_ms=2000&work_ms=500&wait_ms=0"),
            &query(v, "lease_ms=2000&work_ms=0&wait_ms=0"),
            None,
        )
        .await?;
    Ok(judge::clock_skew(
        &duel,
        skewed["clock_skew_ms"].as_i64().unwrap_or(0),
    ))
}

/// Redis stops (503s meanwhile) and comes back empty on the same port: how
/// long until a sale works again?
pub(super) async fn redis_restart(lab: &mut Lab, v: &str) -> anyhow::Result<Judgement> {
    lab.client().reset(v, 5, 0).await?;
    let Some(redis) = lab.redis.as_mut() else {
        anyhow::bail!("the lab can only restart a Redis it started");
    };
    let port = redis.port();
    redis.stop().await;
    let down = lab.send(&lab.stack.url, &query(v, "wait_ms=0")).await?;
    lab.redis = Some(RedisServer::start(Some(port)).await?);
    let back = Instant::now();
    let mut selling_again_after = None;
    // Redis came back empty: the SKU must be stocked again before it can sell.
    while back.elapsed() < Duration::from_secs(5) && selling_again_after.is_none() {
        if lab.client().reset(v, 5, 0).await.is_ok()
            && lab
                .send(&lab.stack.url, &query(v, "wait_ms=0"))
                .await?
                .sold()
        {
            selling_again_after = Some(back.elapsed());
        } else {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(judge::redis_restart(&down, selling_again_after))
}

/// Two of the five Redlock nodes are killed; the race runs on the three left.
pub(super) async fn redlock_minority_down(
    lab: &mut Lab,
    variant: Variant,
) -> anyhow::Result<Judgement> {
    let killed = lab.kill_nodes(&[3, 4]).await;
    let state = race_load(lab, &lab.stack.url, variant).await;
    lab.restart_nodes(&[3, 4]).await?;
    Ok(judge::minority_down(&killed, &lab.ledger_of(state?).await?))
}

/// Three of the five Redlock nodes are killed: busy with a reason; after
/// they come back (empty), how long until a sale works again?
pub(super) async fn redlock_majority_down(lab: &mut Lab, v: &str) -> anyhow::Result<Judgement> {
    lab.client().reset(v, 5, 0).await?;
    let killed = lab.kill_nodes(&[2, 3, 4]).await;
    let base = lab.stack.url.clone();
    let fast = lab.send(&base, &query(v, "wait_ms=0")).await?;
    let waited = lab.send(&base, &query(v, "wait_ms=500")).await?;
    lab.restart_nodes(&[2, 3, 4]).await?;
    let back = Instant::now();
    let mut selling_again_after = None;
    while back.elapsed() < Duration::from_secs(5) && selling_again_after.is_none() {
        if lab.send(&base, &query(v, "wait_ms=1000")).await?.sold() {
            selling_again_after = Some(back.elapsed());
        }
    }
    Ok(judge::majority_down(
        &killed,
        &MajorityDown {
            fast,
            waited,
            selling_again_after,
            ledger: lab.ledger(v).await?,
        },
    ))
}

/// Redlock: nodes 4 and 5 are down when the holder (instance a, 30 s lease)
/// takes the lock on nodes 1-3 and freezes in its section; node 3 restarts
/// empty and 4 and 5 come back, so instance b finds a majority (3, 4, 5)
/// while the holder still has most of its lease. `fenced`: its one Redis
/// forgets the lock the same way (the key is deleted) under a frozen holder.
pub(super) async fn restart_without_persistence(
    lab: &mut Lab,
    variant: Variant,
) -> anyhow::Result<Judgement> {
    let v = variant.name();
    lab.client().reset(v, 5, 0).await?;
    lab.client()
        .chaos(&ChaosAction::PauseHolder {
            ms: FROZEN.as_millis() as u64,
        })
        .await?;
    let holder = query(v, "work_ms=0&wait_ms=0");
    let newcomer = query(v, "work_ms=0&wait_ms=2500");
    if variant != Variant::Redlock {
        let (duel, struck) = lab.duel(v, &holder, &newcomer, Some(vanish(v))).await?;
        let forgotten = if struck["deleted"] == true {
            Ok(())
        } else {
            Err(said!(
                "the lock was not there to forget (deleted: false)",
                "没有锁可遗忘(该操作的应答表明锁并不存在)"
            ))
        };
        let frozen = FROZEN.as_secs();
        let story = said!(
            "the holder on a froze {frozen} s and its lock was deleted, as a restart without persistence forgets it",
            "实例 a 上的持有者冻结 {frozen} s,它的锁被删除,就像一次不带持久化的重启会忘掉它一样"
        );
        return Ok(judge::forgotten_lock(&duel, &story, &forgotten, FROZEN));
    }
    let mut killed = lab.kill_nodes(&[3, 4]).await;
    let entered = lab.section_entered(v).await?;
    let first = lab.send(&lab.instance(0).url, &holder);
    let entered = entered.await;
    // The holder has nodes 1-3 and is frozen. Node 3 restarts empty; 4 and 5 return.
    killed = killed.and(lab.kill_nodes(&[2]).await);
    lab.restart_nodes(&[2, 3, 4]).await?;
    let newcomer = lab.send(&lab.instance(1).url, &newcomer).await?;
    let duel = Duel {
        entered,
        holder: first.await?,
        newcomer,
        ledger: lab.ledger(v).await?,
    };
    let frozen = FROZEN.as_secs();
    let story = said!(
        "the holder on a took nodes 1-3 (4 and 5 down) with a 30 s lease and froze {frozen} s; node 3 restarted empty, 4 and 5 came back",
        "实例 a 上的持有者以 30 s 的租约拿下节点 1-3(4 号和 5 号宕机),然后冻结 {frozen} s;节点 3 清空后重启,4 号和 5 号恢复"
    );
    Ok(judge::forgotten_lock(&duel, &story, &killed, FROZEN))
}
