//! The lab's scenarios as the matrix names them: each failure mode of the
//! articles, its one-line summary, and each variant's claim in it (read from
//! the variant's [`Claims`]). The variants, the checker (`crate::check`)
//! and the lab (`crate::lab::scenario`, which plays them) share this list.

use std::fmt;
use std::str::FromStr;

use super::{Claim, Variant};

/// Every failure scenario of the lab.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scenario {
    OneInstance,
    Race,
    SlowBusiness,
    CrashAfterAcquire,
    PauseHolder,
    KillInstance,
    LockVanishesEarly,
    LockVanishes,
    RetryStorm,
    ClockSkew,
    RedisRestart,
    RedisPause,
    RedlockMinorityDown,
    RedlockMajorityDown,
    RedlockRestartWithoutPersistence,
    Failover,
    FailoverWaitEarly,
    FailoverWait,
    CrashBeforeEnqueue,
    WorkerCrashBeforeAck,
    PostgresRestart,
    CommitAnswerLost,
    ReservationExpiry,
    RedisDataLoss,
}

impl Scenario {
    /// All of them, in the order the lab runs them.
    pub const ALL: [Scenario; 24] = [
        Scenario::OneInstance,
        Scenario::Race,
        Scenario::SlowBusiness,
        Scenario::CrashAfterAcquire,
        Scenario::PauseHolder,
        Scenario::KillInstance,
        Scenario::LockVanishesEarly,
        Scenario::LockVanishes,
        Scenario::RetryStorm,
        Scenario::ClockSkew,
        Scenario::RedisRestart,
        Scenario::RedisPause,
        Scenario::RedlockMinorityDown,
        Scenario::RedlockMajorityDown,
        Scenario::RedlockRestartWithoutPersistence,
        Scenario::Failover,
        Scenario::FailoverWaitEarly,
        Scenario::FailoverWait,
        Scenario::CrashBeforeEnqueue,
        Scenario::WorkerCrashBeforeAck,
        Scenario::PostgresRestart,
        Scenario::CommitAnswerLost,
        Scenario::ReservationExpiry,
        Scenario::RedisDataLoss,
    ];

    /// The name on the command line, in the matrix and in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::OneInstance => "one-instance",
            Scenario::Race => "race",
            Scenario::SlowBusiness => "slow-business",
            Scenario::CrashAfterAcquire => "crash-after-acquire",
            Scenario::PauseHolder => "pause-holder",
            Scenario::KillInstance => "kill-instance",
            Scenario::LockVanishesEarly => "lock-vanishes-early",
            Scenario::LockVanishes => "lock-vanishes",
            Scenario::RetryStorm => "retry-storm",
            Scenario::ClockSkew => "clock-skew",
            Scenario::RedisRestart => "redis-restart",
            Scenario::RedisPause => "redis-pause",
            Scenario::RedlockMinorityDown => "redlock-minority-down",
            Scenario::RedlockMajorityDown => "redlock-majority-down",
            Scenario::RedlockRestartWithoutPersistence => "redlock-restart-without-persistence",
            Scenario::Failover => "failover",
            Scenario::FailoverWaitEarly => "failover-wait-early",
            Scenario::FailoverWait => "failover-wait",
            Scenario::CrashBeforeEnqueue => "crash-before-enqueue",
            Scenario::WorkerCrashBeforeAck => "worker-crash-before-ack",
            Scenario::PostgresRestart => "postgres-restart",
            Scenario::CommitAnswerLost => "commit-answer-lost",
            Scenario::ReservationExpiry => "reservation-expiry",
            Scenario::RedisDataLoss => "redis-data-loss",
        }
    }

    /// Older names still accepted.
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            // It covered setnx alone before every lock could crash after acquiring.
            Scenario::CrashAfterAcquire => &["crash-after-setnx"],
            _ => &[],
        }
    }

    /// One line: the fault, for `stocklock lab --help`.
    pub fn summary(self) -> &'static str {
        match self {
            Scenario::OneInstance => {
                "the race sent to one instance only: 400 buyers (64 at once, work_ms=2) for 50 units"
            }
            Scenario::Race => "two instances, 400 buyers (64 at once, work_ms=2) for 50 units",
            Scenario::SlowBusiness => {
                "three buyers whose work (600 ms) outlives the lease (200 ms; etcd: 3 s and its shortest, 1 s)"
            }
            Scenario::CrashAfterAcquire => {
                "the holder crashes right after taking the lock (setnx: between SETNX and EXPIRE); lease 1 s"
            }
            Scenario::PauseHolder => {
                "the holder freezes (SIGSTOP) for 1.5 s, past its 300 ms lease, right before its write (etcd: 2.5 s, past its 1 s)"
            }
            Scenario::KillInstance => {
                "the holder's instance is killed (SIGKILL) in the middle of its work; lease 1 s"
            }
            Scenario::LockVanishesEarly => {
                "the lock key is deleted under its holder while it works, before its watchdog's next renewal (a failover, a clock jump)"
            }
            Scenario::LockVanishes => {
                "the lock key is deleted under its holder at the worst moment: after its watchdog's last renewal before the write"
            }
            Scenario::RetryStorm => "sixteen concurrent retries of one request_id",
            Scenario::ClockSkew => "instance b's clock runs 5 s ahead while a holds the lock",
            Scenario::RedisRestart => "Redis stops (503s meanwhile) and comes back empty",
            Scenario::RedisPause => {
                "Redis stops answering for 2.5 s mid-sale (an instance waits 1 s): 30 buyers with request ids told unknown; each id must resolve on retry, each unit sold once"
            }
            Scenario::RedlockMinorityDown => "the race with two of Redlock's five nodes dead",
            Scenario::RedlockMajorityDown => "three of Redlock's five nodes dead, then back empty",
            Scenario::RedlockRestartWithoutPersistence => {
                "a node that granted the lock restarts empty under a frozen holder"
            }
            Scenario::Failover => {
                "the lock's store fails over under its holder: the Redis master dies before the lock reached its replica and Sentinel promotes the replica (etcd: the leader dies; ZooKeeper: the leader of three)"
            }
            Scenario::FailoverWaitEarly => {
                "the same Redis failover, the holder having asked WAIT for one replica after taking its lock (replicas=1), replication held back before the lock reached the replica"
            }
            Scenario::FailoverWait => {
                "the same, replication held back after WAIT saw the lock on the replica: the master dies after the holder's write and release, and the replica it never reached is promoted"
            }
            Scenario::CrashBeforeEnqueue => {
                "an instance crashes right after one sale's script (lua-then-queue: before its XADD); the orders reconciled with the sales"
            }
            Scenario::WorkerCrashBeforeAck => {
                "the order worker that committed a batch dies before its XACK; its messages are delivered again (claim idle 1 s)"
            }
            Scenario::PostgresRestart => {
                "PostgreSQL stops while three units sell, then starts again; every sale must end up as one order (a variant whose stock it keeps: it crashes after a sale whose commit's answer was lost and under a buyer held before its write, and every request id must resolve once)"
            }
            Scenario::CommitAnswerLost => {
                "PostgreSQL commits a sale and its answer is lost on the way back (the relay between instance a and PostgreSQL closes the connection): the buyer is told unknown, and asking again with its request id must find the sale"
            }
            Scenario::ReservationExpiry => {
                "six reservations (pay within 2 s), three paid; the other three expire and give their unit back, once"
            }
            Scenario::RedisDataLoss => {
                "Redis restarts empty with three orders in flight (PostgreSQL down), then a reset and three sales; reconcile must report what the ledger lost"
            }
        }
    }

    /// What `variant` claims to do here, from its own file.
    pub fn claim(self, variant: Variant) -> Claim {
        let claims = &variant.about().claims;
        match self {
            Scenario::OneInstance => claims.one_instance,
            Scenario::Race => claims.race,
            Scenario::SlowBusiness => claims.slow_business,
            Scenario::CrashAfterAcquire => claims.crash_after_acquire,
            Scenario::PauseHolder => claims.pause_holder,
            Scenario::KillInstance => claims.kill_instance,
            Scenario::LockVanishesEarly => claims.lock_vanishes_early,
            Scenario::LockVanishes => claims.lock_vanishes,
            Scenario::RetryStorm => claims.retry_storm,
            Scenario::ClockSkew => claims.clock_skew,
            Scenario::RedisRestart => claims.redis_restart,
            Scenario::RedisPause => claims.redis_pause,
            Scenario::RedlockMinorityDown => claims.redlock_minority_down,
            Scenario::RedlockMajorityDown => claims.redlock_majority_down,
            Scenario::RedlockRestartWithoutPersistence => {
                claims.redlock_restart_without_persistence
            }
            Scenario::Failover => claims.failover,
            Scenario::FailoverWaitEarly => claims.failover_wait_early,
            Scenario::FailoverWait => claims.failover_wait,
            Scenario::CrashBeforeEnqueue => claims.crash_before_enqueue,
            Scenario::WorkerCrashBeforeAck => claims.worker_crash_before_ack,
            Scenario::PostgresRestart => claims.postgres_restart,
            Scenario::CommitAnswerLost => claims.commit_answer_lost,
            Scenario::ReservationExpiry => claims.reservation_expiry,
            Scenario::RedisDataLoss => claims.redis_data_loss,
        }
    }

    /// The names of all scenarios, for error messages.
    pub fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|s| s.name()).collect()
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The name did not match any scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownScenario(pub String);

impl fmt::Display for UnknownScenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no scenario {:?}; valid: {}",
            self.0,
            Scenario::names().join(", ")
        )
    }
}

impl std::error::Error for UnknownScenario {}

impl FromStr for Scenario {
    type Err = UnknownScenario;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|s| s.name() == name || s.aliases().contains(&name))
            .ok_or_else(|| UnknownScenario(name.to_owned()))
    }
}

/// `stocklock lab [SCENARIO]...`: clap lists the scenarios, with their
/// summaries, in `--help`.
impl clap::ValueEnum for Scenario {
    fn value_variants<'a>() -> &'a [Self] {
        &Self::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(
            clap::builder::PossibleValue::new(self.name())
                .help(self.summary())
                .aliases(self.aliases()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::variants::Behaviour;

    #[test]
    fn names_round_trip_and_the_old_name_still_parses() {
        for s in Scenario::ALL {
            assert_eq!(s.name().parse::<Scenario>(), Ok(s));
        }
        let mut names = Scenario::names();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Scenario::ALL.len());
        assert_eq!(
            "crash-after-setnx".parse::<Scenario>(),
            Ok(Scenario::CrashAfterAcquire)
        );
        assert!("Race".parse::<Scenario>().is_err());
    }

    #[test]
    fn every_scenario_applies_to_some_variant() {
        for s in Scenario::ALL {
            assert!(
                Variant::ALL.iter().any(|&v| s.claim(v).applies()),
                "{s} has no cell"
            );
        }
    }

    #[test]
    fn redis_pause_is_claimed_safe_by_the_scripts_without_orders_only() {
        for v in Variant::ALL {
            let claim = Scenario::RedisPause.claim(v);
            let wanted = matches!(v, Variant::Lua | Variant::LuaBatch | Variant::LuaSharded);
            assert_eq!(claim.applies(), wanted, "{v}");
            if wanted {
                assert_eq!(claim.behaviour, Behaviour::Safe, "{v}");
            }
        }
    }

    #[test]
    fn lua_has_no_pause_holder_cell() {
        let claim = Scenario::PauseHolder.claim(Variant::Lua);
        assert!(!claim.applies());
        assert_eq!(claim.text(), "- (no gap: one script)");
    }
}
