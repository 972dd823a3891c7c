//! The nemesis's faults: every kind the stack can take, which of the lab's
//! scenarios each one can realise (so a variant is judged by the claims it
//! made there), and the schedule a seed draws.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::variants::{Behaviour, Scenario, Variant};
use crate::wire::SoakFault;

/// A kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    // Chaos actions (`POST /api/admin/chaos`).
    PauseHolder,
    CrashAfterAcquire,
    CrashAfterWrite,
    LockVanishes,
    Crash,
    CrashBeforeEnqueue,
    WorkerCrashBeforeAck,
    PauseRedis,
    RestartRedis,
    ClockSkew,
    // Processes killed (-9) or frozen (SIGSTOP, then SIGCONT).
    KillInstance,
    StopInstance,
    KillRedlockNode,
    StopRedlockNode,
    KillEtcd,
    StopEtcd,
    KillZookeeper,
    StopZookeeper,
    KillPostgres,
    StopPostgres,
    /// An instance cut off from Redis: its relay frozen, its bytes held
    /// in the kernel and delivered late when the partition lifts.
    Partition,
}

impl Kind {
    pub const ALL: [Kind; 21] = [
        Kind::PauseHolder,
        Kind::CrashAfterAcquire,
        Kind::CrashAfterWrite,
        Kind::LockVanishes,
        Kind::Crash,
        Kind::CrashBeforeEnqueue,
        Kind::WorkerCrashBeforeAck,
        Kind::PauseRedis,
        Kind::RestartRedis,
        Kind::ClockSkew,
        Kind::KillInstance,
        Kind::StopInstance,
        Kind::KillRedlockNode,
        Kind::StopRedlockNode,
        Kind::KillEtcd,
        Kind::StopEtcd,
        Kind::KillZookeeper,
        Kind::StopZookeeper,
        Kind::KillPostgres,
        Kind::StopPostgres,
        Kind::Partition,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::PauseHolder => "pause-holder",
            Kind::CrashAfterAcquire => "crash-after-acquire",
            Kind::CrashAfterWrite => "crash-after-write",
            Kind::LockVanishes => "lock-vanishes",
            Kind::Crash => "crash",
            Kind::CrashBeforeEnqueue => "crash-before-enqueue",
            Kind::WorkerCrashBeforeAck => "worker-crash-before-ack",
            Kind::PauseRedis => "pause-redis",
            Kind::RestartRedis => "restart-redis",
            Kind::ClockSkew => "clock-skew",
            Kind::KillInstance => "kill-instance",
            Kind::StopInstance => "stop-instance",
            Kind::KillRedlockNode => "kill-redlock-node",
            Kind::StopRedlockNode => "stop-redlock-node",
            Kind::KillEtcd => "kill-etcd",
            Kind::StopEtcd => "stop-etcd",
            Kind::KillZookeeper => "kill-zookeeper",
            Kind::StopZookeeper => "stop-zookeeper",
            Kind::KillPostgres => "kill-postgres",
            Kind::StopPostgres => "stop-postgres",
            Kind::Partition => "partition",
        }
    }

    pub fn parse(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The lab's scenarios this fault can realise, whichever moment it
    /// strikes. A process that dies or freezes takes every section it was
    /// running with it, at whatever step each was, so a crash (however it
    /// was armed) is also a crash right after acquiring, before an order's
    /// enqueue and before a worker's ack; a freeze is a paused holder and a
    /// business that outlived its lease; a partition is a freeze of the
    /// instance's Redis traffic whose bytes arrive late.
    ///
    /// And a call that outlives the store's 1 s response timeout, or whose
    /// connection breaks, loses its answer: a Redis asleep or restarted, or
    /// an instance frozen, for longer leaves a sale whose script ran with
    /// its answer lost (`unknown`, so the order's XADD is never sent; the
    /// retry with its id is a replay, which sends none either), or the XADD
    /// after it refused (Redis gone, or loading): the unit sold, no order.
    /// That is crash-before-enqueue's gap, seen from the store's side (the
    /// soak shows it: `--variant lua-then-queue --faults pause-redis`).
    pub fn scenarios(self) -> &'static [Scenario] {
        use Scenario as S;
        const CRASH: &[Scenario] = &[
            S::KillInstance,
            S::CrashAfterAcquire,
            S::CrashBeforeEnqueue,
            S::WorkerCrashBeforeAck,
        ];
        const FREEZE: &[Scenario] = &[S::PauseHolder, S::SlowBusiness, S::CrashBeforeEnqueue];
        match self {
            Kind::PauseHolder | Kind::StopInstance => FREEZE,
            Kind::CrashAfterAcquire
            | Kind::CrashAfterWrite
            | Kind::Crash
            | Kind::CrashBeforeEnqueue
            | Kind::WorkerCrashBeforeAck
            | Kind::KillInstance => CRASH,
            Kind::LockVanishes => &[S::LockVanishes, S::LockVanishesEarly],
            Kind::PauseRedis => &[S::RedisPause, S::SlowBusiness, S::CrashBeforeEnqueue],
            Kind::RestartRedis => &[S::RedisRestart, S::CrashBeforeEnqueue],
            Kind::ClockSkew => &[S::ClockSkew],
            Kind::KillRedlockNode => &[
                S::RedlockMinorityDown,
                S::RedlockMajorityDown,
                S::RedlockRestartWithoutPersistence,
            ],
            Kind::StopRedlockNode => &[S::RedlockMinorityDown, S::RedlockMajorityDown],
            Kind::KillEtcd | Kind::StopEtcd | Kind::KillZookeeper | Kind::StopZookeeper => {
                &[S::Failover]
            }
            Kind::KillPostgres | Kind::StopPostgres => &[S::PostgresRestart],
            Kind::Partition => &[
                S::PauseHolder,
                S::SlowBusiness,
                S::RedisPause,
                S::KillInstance,
                S::CrashBeforeEnqueue,
            ],
        }
    }

    /// Whether it strikes every SKU (a process, a server) rather than the
    /// one SKU it names (a lock deleted).
    pub fn strikes_all(self) -> bool {
        self != Kind::LockVanishes
    }
}

/// One fault of the schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Planned {
    /// From the start of the load.
    pub(super) at: Duration,
    pub(super) kind: Kind,
    /// Picks the instance, node or SKU it hits (modulo how many there are).
    pub(super) pick: u32,
    /// How long a freeze, pause or partition lasts; how long a killed
    /// server stays down before it is started again.
    pub(super) hold: Duration,
}

/// The faults of a run: `kinds` in turn (`cycle`) or drawn from them at
/// random, one every 2 to 6 s (every 4 s in turn), a fifth of them
/// together with another; all of it from `seed`, so that the same seed
/// plays the same schedule.
pub(super) fn schedule(seed: u64, kinds: &[Kind], cycle: bool, length: Duration) -> Vec<Planned> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut plan = Vec::new();
    if kinds.is_empty() {
        return plan;
    }
    let mut at = Duration::from_secs(3);
    let mut turn = 0usize;
    while at < length {
        let together = if cycle {
            1
        } else {
            1 + usize::from(rng.u8(0..5) == 0)
        };
        for _ in 0..together {
            let kind = if cycle {
                kinds[turn % kinds.len()]
            } else {
                kinds[rng.usize(0..kinds.len())]
            };
            turn += 1;
            plan.push(Planned {
                at,
                kind,
                pick: rng.u32(..),
                hold: Duration::from_millis(rng.u64(500..=2_500)),
            });
        }
        at += if cycle {
            Duration::from_secs(4)
        } else {
            Duration::from_millis(rng.u64(2_000..=6_000))
        };
    }
    plan
}

/// How long after a fault healed its effects may still show (a stale
/// lock's lease, a late write, an instance's restart).
pub const GRACE_S: f64 = 10.0;

/// The faults that struck `sku` between `from_s` and `to_s`.
pub fn struck<'a>(
    faults: &'a [SoakFault],
    sku: &str,
    from_s: f64,
    to_s: f64,
) -> Vec<&'a SoakFault> {
    faults
        .iter()
        .filter(|f| f.error.is_empty())
        .filter(|f| f.at_s <= to_s && f.healed_s + GRACE_S >= from_s)
        .filter(|f| Kind::parse(&f.kind).is_some_and(Kind::strikes_all) || f.target == sku)
        .collect()
}

/// The behaviours `variant` claims under `faults` (and under the race and
/// the retries every round has): the union of its claims in every
/// scenario those faults can realise.
pub fn allowed(variant: Variant, faults: &[&SoakFault], persist: bool) -> BTreeSet<Behaviour> {
    let mut scenarios = vec![Scenario::Race, Scenario::RetryStorm];
    for fault in faults {
        if let Some(kind) = Kind::parse(&fault.kind) {
            scenarios.extend_from_slice(kind.scenarios());
            if kind == Kind::RestartRedis && !persist {
                scenarios.push(Scenario::RedisDataLoss);
            }
        }
    }
    scenarios
        .iter()
        .map(|s| s.claim(variant).behaviour)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_draws_the_same_schedule_and_another_seed_another() {
        let ten = Duration::from_secs(600);
        let a = schedule(7, &Kind::ALL, false, ten);
        assert_eq!(a, schedule(7, &Kind::ALL, false, ten));
        assert_ne!(a, schedule(8, &Kind::ALL, false, ten));
        // A fault every 2 to 6 s: 100 to 300 moments in 10 minutes.
        assert!((100..=400).contains(&a.len()), "{}", a.len());
        assert!(a.windows(2).any(|w| w[0].at == w[1].at), "none together");
    }

    /// The seed tests/api/soak/ plays to strike both PostgreSQL faults at
    /// once (six seconds of them: this one moment).
    #[test]
    fn seed_8_strikes_postgres_killed_and_stopped_at_once() {
        let kinds = [Kind::KillPostgres, Kind::StopPostgres];
        let plan = schedule(8, &kinds, false, Duration::from_secs(6));
        let at: Vec<(u128, Kind)> = plan.iter().map(|p| (p.at.as_millis(), p.kind)).collect();
        assert_eq!(
            at,
            [(3_000, Kind::KillPostgres), (3_000, Kind::StopPostgres)]
        );
    }

    #[test]
    fn a_cycle_strikes_every_kind_in_turn() {
        let plan = schedule(1, &Kind::ALL, true, Duration::from_secs(4 * 21 + 3));
        let kinds: Vec<Kind> = plan.iter().map(|p| p.kind).collect();
        assert_eq!(kinds, Kind::ALL.to_vec());
    }

    #[test]
    fn every_kind_has_a_name_that_parses_back() {
        for kind in Kind::ALL {
            assert_eq!(Kind::parse(kind.name()), Some(kind));
            assert!(!kind.scenarios().is_empty());
        }
    }
}
