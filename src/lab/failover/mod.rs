//! The `failover`, `failover-wait-early` and `failover-wait` scenarios:
//! the lock's store fails over under a holder.
//!
//! Each cell runs on a stack of its own (a failover cannot be undone):
//!
//! - **Redis** (`token`, `watchdog`, `fenced`): `up --replica`. The reset
//!   reaches the replica (`WAIT 1`), then replication is held back (the
//!   relay between master and replica is stopped, so what the master
//!   writes from now on never reaches the replica). The holder on instance
//!   a takes its lock on the master, reads the stock and waits at its
//!   gate before its write (the gates meet on a Redis apart, which
//!   outlives the master); the master and the relay are SIGKILLed;
//!   Sentinel promotes the replica, which never saw the lock; a newcomer
//!   on instance b takes the same lock there and sells; then the holder is
//!   let go and writes too. With `failover-wait-early` the
//!   holder asks `WAIT` for one replica after taking the lock
//!   (`replicas=1`), sees none, releases and sells nothing.
//! - **Redis, `failover-wait`** (`token`): the worst moment for `WAIT`.
//!   Replication runs while the holder takes its lock, so its `WAIT`
//!   succeeds; once the holder waits at its gate before its write and the
//!   lab has read its lock on the replica, replication is held back; the
//!   holder is let go and sells (on
//!   the master only) and releases; the master and the relay are killed,
//!   Sentinel promotes the replica, which has the stock as it was before
//!   the sale and the holder's lock; the newcomer waits for that lock's
//!   lease and sells the same unit again.
//! - **etcd**: three members; the leader is SIGKILLed while the holder
//!   works. **ZooKeeper**: three servers; the leader is SIGKILLed. The
//!   newcomer must wait for the holder's release: the lock survived.
//!
//! This module: which cell plays how, the stacks, etcd and ZooKeeper;
//! `replicated`: the Redis cells.

mod replicated;

use crate::history::Recorder;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nix::sys::signal::Signal;

use super::Lab;
use super::report::Cell;
use super::scenario::Scenario;
use crate::harness::stack::{Stack, UpOptions};
use crate::judge::{self, Failover, Judgement, Replication, check, said_of};
use crate::os::signal;
use crate::said;
use crate::store::Store;
use crate::up::redis::RedisServer;
use crate::variants::Variant;

/// How long the etcd and ZooKeeper holders work after their leader died.
const CP_WORK: Duration = Duration::from_millis(3_000);

/// What a failover scenario does with replication (`None`: `scenario` is
/// not a failover).
fn replication(scenario: Scenario) -> Option<Replication> {
    match scenario {
        Scenario::Failover => Some(Replication::NotAsked),
        Scenario::FailoverWaitEarly => Some(Replication::HeldBeforeWait),
        Scenario::FailoverWait => Some(Replication::HeldAfterWait),
        _ => None,
    }
}

/// Plays one cell of the failover `scenario` against `variant` on a stack
/// of its own.
pub(super) async fn play(
    scenario: Scenario,
    variant: Variant,
    recorder: &Recorder,
) -> anyhow::Result<Judgement> {
    let Some(replication) = replication(scenario) else {
        bail!("{scenario} is not a failover scenario");
    };
    // The Redis cells hold their holder at a gate; the gates meet on a
    // Redis apart, which outlives the master's death.
    let gates = match variant {
        Variant::Etcd | Variant::ZooKeeper => None,
        _ => Some(RedisServer::start(None).await?),
    };
    let gates_url = gates.as_ref().map(RedisServer::url);
    let mut args: Vec<&str> = match variant {
        Variant::Etcd => vec!["--etcd", "3", "--zookeeper", "0"],
        Variant::ZooKeeper => vec!["--etcd", "0", "--zookeeper", "3"],
        _ => vec!["--replica", "--etcd", "0", "--zookeeper", "0"],
    };
    if let Some(url) = &gates_url {
        args.extend(["--gate-redis", url]);
    }
    let mut lab = own_lab(&args, recorder).await?;
    let played = match (variant, replication, &gates_url) {
        (Variant::Etcd | Variant::ZooKeeper, _, _) => leader_dies(&mut lab, variant).await,
        (_, _, None) => Err(anyhow::anyhow!("no Redis for the gates")),
        (_, Replication::HeldAfterWait, Some(gates)) => {
            replicated::write_lost(&mut lab, variant, gates).await
        }
        (_, _, Some(gates)) => replicated::master_dies(&mut lab, variant, replication, gates).await,
    };
    lab.stack.stop().await;
    Ok(judge::failover(&played?))
}

/// The `failover` cell of each lock store, for `stocklock compare`: the
/// `token` lock on a replicated Redis (`redis`; `redis+wait`: its holder
/// WAITs for the replica, which gets its lock but not its write:
/// `failover-wait`, the moment WAIT cannot cover), `etcd` and `zookeeper`,
/// each on a stack of its own.
pub async fn failover_by_store() -> anyhow::Result<Vec<(&'static str, Cell)>> {
    let mut cells = Vec::new();
    for (store, variant, scenario) in [
        ("redis", Variant::Token, Scenario::Failover),
        ("redis+wait", Variant::Token, Scenario::FailoverWait),
        ("etcd", Variant::Etcd, Scenario::Failover),
        ("zookeeper", Variant::ZooKeeper, Scenario::Failover),
    ] {
        eprintln!("compare: {scenario}, {store} ({variant})");
        let recorder = Recorder::prefixed(&format!("{scenario}/{variant}/"));
        let judgement = play(scenario, variant, &recorder).await?;
        let claim = scenario.claim(variant);
        let model = crate::check::check(variant, scenario);
        let second = crate::judge::second::second_opinion(&recorder, judgement.observed);
        let mut cell = Cell::new(scenario, variant, &claim, judgement, model.as_ref());
        cell.set_second_opinion(second);
        cells.push((store, cell));
    }
    Ok(cells)
}

/// A chaos-mode stack of two instances with `args`, and a lab on it.
async fn own_lab(args: &[&str], recorder: &Recorder) -> anyhow::Result<Lab> {
    let mut all = vec![
        "--chaos",
        "--instances",
        "2",
        "--redlock",
        "0",
        "--orders",
        "off",
    ];
    all.extend_from_slice(args);
    let mut stack = Stack::start(&UpOptions {
        args: all.into_iter().map(str::to_owned).collect(),
        ..UpOptions::default()
    })
    .await?;
    stack.client = stack.client.recording(recorder.clone());
    let redis_url = stack
        .redis_url
        .clone()
        .context("the failover stack announced no Redis")?;
    Ok(Lab {
        store: Store::open(&redis_url)?,
        stack,
        redis: None,
        redis_url,
        restarted_nodes: Vec::new(),
        deaths: 0,
        timelines: None,
        lasts: false,
        cell: String::new(),
        prefix: String::new(),
    })
}

fn query(v: &str, knobs: &str) -> String {
    format!("/deductStock/{v}?sku={v}&{knobs}")
}

/// The etcd and ZooKeeper cells: the leader dies while the holder works.
async fn leader_dies(lab: &mut Lab, variant: Variant) -> anyhow::Result<Failover> {
    let v = variant.name();
    lab.client().reset(v, 5, 0).await?;
    let entered = lab.section_entered(v).await?;
    let holder_sent = Instant::now();
    let holder = lab.send(
        &lab.instance(0).url,
        &query(
            v,
            &format!("lease_ms=5000&work_ms={}&wait_ms=0", CP_WORK.as_millis()),
        ),
    );
    let in_section = entered.await;
    let (name, pid) = if variant == Variant::Etcd {
        crate::harness::failover::etcd_leader(&lab.stack).await?
    } else {
        crate::harness::failover::zookeeper_leader(&lab.stack).await?
    };
    signal(pid, Signal::SIGKILL);
    let newcomer_sent = Instant::now();
    let newcomer = lab
        .send(
            &lab.instance(1).url,
            &query(v, "lease_ms=5000&work_ms=0&wait_ms=15000"),
        )
        .await?;
    let holder = holder.await?;
    let ledger = lab.ledger(v).await?;
    Ok(Failover {
        fault: said_of!(
            "{} (pid {pid}) killed in the holder's section",
            "{}(PID {pid})在持有者的临界区内被杀死";
            name
        ),
        landed: check(in_section, || {
            said!(
                "the holder never entered its section before the leader died",
                "领导者死掉之前,持有者从未进入临界区"
            )
        }),
        newcomer_after_holder: newcomer_sent + newcomer.took > holder_sent + holder.took,
        holder,
        newcomer,
        replication: Replication::NotAsked,
        ledger,
    })
}
