//! The lab's scenarios: each failure mode of the articles, what it does to
//! the stack, and what it hands its judge.
//!
//! A scenario only plays and gathers evidence (answers, the ledger, the
//! facts that show its fault landed); deciding what that evidence shows is
//! the judges' part ([`crate::judge`]). Which variants a scenario applies to,
//! and what each should do, is said by the variants themselves
//! ([`crate::variants::Claims`]).
//!
//! The scenarios themselves (names, summaries, each variant's claim, the
//! command line's values) are [`crate::variants::Scenario`], shared with the
//! checker. This module: where each cell plays; `play`: what each one on
//! the main stack does, `redis_pause` the one that pauses Redis,
//! `database` the two that fail PostgreSQL under the variants whose
//! stock it keeps (a crash, a commit's answer lost) and `redis-then-pg`'s
//! instance killed between its two stores, `vanish` the two that delete the lock under its holder (the failover scenarios
//! play in `failover/`, the order scenarios in `orders/`).

mod database;
mod play;
mod redis_pause;
mod vanish;

use super::Lab;
use crate::check::protocol::Protocol;
use crate::judge::Judgement;
use crate::variants::Variant;
pub use crate::variants::{Scenario, UnknownScenario};

impl Scenario {
    /// Whether the scenario touches nothing but its SKU: buyers and their
    /// knobs, no fault that strikes an instance, a store or a lock key
    /// (what a classroom seat may play on its own SKUs, `--sku-prefix`).
    pub fn per_sku(self) -> bool {
        matches!(
            self,
            Scenario::OneInstance | Scenario::Race | Scenario::SlowBusiness
        )
    }

    /// Whether `variant`'s cell runs on a stack of its own (the failover
    /// ones, a failover cannot be undone; the order ones, which need
    /// PostgreSQL and timings of their own), not on the lab's main stack.
    /// A crash of PostgreSQL under a variant whose stock it keeps plays
    /// on the main stack, whose PostgreSQL `up` starts again.
    pub fn own_stack(self, variant: Variant) -> bool {
        if self == Scenario::PostgresRestart && variant.stock_in_postgres() {
            return false;
        }
        matches!(
            self,
            Scenario::Failover
                | Scenario::FailoverWaitEarly
                | Scenario::FailoverWait
                | Scenario::CrashBeforeEnqueue
                | Scenario::WorkerCrashBeforeAck
                | Scenario::PostgresRestart
                | Scenario::ReservationExpiry
                | Scenario::RedisDataLoss
        )
    }

    /// Plays this scenario against `variant` on the lab's main stack and
    /// judges what it saw. The scenarios on a stack of their own
    /// ([`Scenario::own_stack`]) are played by the runner, which knows
    /// where they live (`failover/`, `orders/`): they name this type, so
    /// this type does not name them.
    pub(super) async fn play(self, lab: &mut Lab, variant: Variant) -> anyhow::Result<Judgement> {
        let v = variant.name();
        match self {
            Scenario::OneInstance => play::one_instance(lab, variant).await,
            Scenario::Race => play::race(lab, variant).await,
            Scenario::SlowBusiness => play::slow_business(lab, v).await,
            Scenario::CrashAfterAcquire => play::crash_after_acquire(lab, v).await,
            // A database lock: frozen, then cut off from PostgreSQL.
            Scenario::PauseHolder if variant.stock_in_postgres() => {
                database::silent_holder(lab, variant).await
            }
            Scenario::PauseHolder => play::pause_holder(lab, v).await,
            // No lock to leave behind: killed between its two stores.
            Scenario::KillInstance if Protocol::of(variant).two_stores() => {
                database::kill_between_stores(lab, variant).await
            }
            Scenario::KillInstance => play::kill_instance(lab, v).await,
            Scenario::LockVanishesEarly => vanish::lock_vanishes_early(lab, v).await,
            Scenario::LockVanishes => vanish::lock_vanishes(lab, variant).await,
            Scenario::RetryStorm => play::retry_storm(lab, v).await,
            Scenario::ClockSkew => play::clock_skew(lab, v).await,
            Scenario::RedisRestart => play::redis_restart(lab, v).await,
            Scenario::RedisPause => redis_pause::play(lab, variant).await,
            Scenario::PostgresRestart if variant.stock_in_postgres() => {
                database::crash(lab, variant).await
            }
            Scenario::CommitAnswerLost => database::commit_answer_lost(lab, variant).await,
            Scenario::RedlockMinorityDown => play::redlock_minority_down(lab, variant).await,
            Scenario::RedlockMajorityDown => play::redlock_majority_down(lab, v).await,
            Scenario::RedlockRestartWithoutPersistence => {
                play::restart_without_persistence(lab, variant).await
            }
            Scenario::Failover
            | Scenario::FailoverWaitEarly
            | Scenario::FailoverWait
            | Scenario::CrashBeforeEnqueue
            | Scenario::WorkerCrashBeforeAck
            | Scenario::PostgresRestart
            | Scenario::ReservationExpiry
            | Scenario::RedisDataLoss => {
                anyhow::bail!("{self} plays on a stack of its own")
            }
        }
    }
}
