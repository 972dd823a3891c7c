//! The claims of each family of variants, written once: no lock the
//! instances share, the lease locks on Redis, the consensus locks, the
//! `lua` scripts, the database. A variant's table is its family's, with
//! only the rows where it differs stated in its own file
//! (`Claims { slow_business: ..., ..LEASE_LOCK }`).
//!
//! Each family's table names every scenario, with no `..`: a new scenario
//! does not compile until every family has said what it does in it (a
//! variant that differs from its family there says so in its own file).

use super::{Claim, Claims, Facts};

/// No lock the instances share (`none`, and `local-mutex`, whose lock
/// lives in one process): nothing of a lock for a fault to hit.
pub(super) const NO_SHARED_LOCK: Claims = Claims {
    one_instance: Claim::oversells(""),
    race: Claim::oversells(""),
    slow_business: Claim::oversells(""),
    crash_after_acquire: Claim::NOT_APPLICABLE,
    pause_holder: Claim::NOT_APPLICABLE,
    kill_instance: Claim::NOT_APPLICABLE,
    lock_vanishes_early: Claim::NOT_APPLICABLE,
    lock_vanishes: Claim::NOT_APPLICABLE,
    retry_storm: Claim::safe("one sale per request_id"),
    clock_skew: Claim::NOT_APPLICABLE,
    redis_restart: Claim::NOT_APPLICABLE,
    redis_pause: Claim::NOT_APPLICABLE,
    redlock_minority_down: Claim::NOT_APPLICABLE,
    redlock_majority_down: Claim::NOT_APPLICABLE,
    redlock_restart_without_persistence: Claim::NOT_APPLICABLE,
    failover: Claim::not_applicable("no lock to lose"),
    failover_wait_early: Claim::NOT_APPLICABLE,
    failover_wait: Claim::NOT_APPLICABLE,
    crash_before_enqueue: Claim::NOT_APPLICABLE,
    worker_crash_before_ack: Claim::NOT_APPLICABLE,
    postgres_restart: Claim::NOT_APPLICABLE,
    commit_answer_lost: Claim::NOT_APPLICABLE,
    reservation_expiry: Claim::NOT_APPLICABLE,
    redis_data_loss: Claim::NOT_APPLICABLE,
};

/// A lease lock on Redis (`setnx`, `setnx-expiry`, `token`, `watchdog`,
/// `fenced`, `redlock`), as `token` takes it: safe in the race, freed
/// after its lease when its holder dies, and overselling whenever the
/// lease runs out or the key goes under a holder still at work.
pub(super) const LEASE_LOCK: Claims = Claims {
    one_instance: Claim::not_applicable("adds nothing to the race"),
    race: Claim::safe(""),
    slow_business: Claim::oversells(""),
    crash_after_acquire: Claim::frees("after lease"),
    pause_holder: Claim::oversells(""),
    kill_instance: Claim::frees("after lease"),
    lock_vanishes_early: Claim::oversells(""),
    lock_vanishes: Claim::oversells(""),
    retry_storm: Claim::safe("one sale per request_id"),
    clock_skew: Claim::NOT_APPLICABLE,
    redis_restart: Claim::NOT_APPLICABLE,
    redis_pause: Claim::NOT_APPLICABLE,
    redlock_minority_down: Claim::NOT_APPLICABLE,
    redlock_majority_down: Claim::NOT_APPLICABLE,
    redlock_restart_without_persistence: Claim::NOT_APPLICABLE,
    failover: Claim::oversells("the lock never reached the replica"),
    failover_wait_early: Claim::NOT_APPLICABLE,
    failover_wait: Claim::NOT_APPLICABLE,
    crash_before_enqueue: Claim::NOT_APPLICABLE,
    worker_crash_before_ack: Claim::NOT_APPLICABLE,
    postgres_restart: Claim::NOT_APPLICABLE,
    commit_answer_lost: Claim::NOT_APPLICABLE,
    reservation_expiry: Claim::NOT_APPLICABLE,
    redis_data_loss: Claim::NOT_APPLICABLE,
};

/// A consensus lock's claims in its own words (etcd's lease and revision,
/// ZooKeeper's session and zxid).
pub(super) struct ConsensusWords {
    /// Why slow work stays safe: what keeps the lock alive.
    pub kept_alive: &'static str,
    /// When a dead holder's lock frees itself.
    pub frees_after: &'static str,
    /// What refuses a frozen holder's write.
    pub stale_refused: &'static str,
    /// Where the lock lives (no Redis key to delete under its holder).
    pub lives_on: &'static str,
    /// Why a failover of its store does not lose it.
    pub failover: &'static str,
}

/// A lock in a consensus store (`etcd`, `zookeeper`): kept alive while its
/// holder lives, fenced by the store's own counter, surviving a failover.
pub(super) const fn consensus_lock(words: ConsensusWords) -> Claims {
    Claims {
        one_instance: Claim::not_applicable("adds nothing to the race"),
        race: Claim::safe(""),
        slow_business: Claim::safe(words.kept_alive),
        crash_after_acquire: Claim::frees(words.frees_after),
        pause_holder: Claim::safe(words.stale_refused),
        kill_instance: Claim::frees(words.frees_after),
        lock_vanishes_early: Claim::not_applicable(words.lives_on),
        lock_vanishes: Claim::not_applicable(words.lives_on),
        retry_storm: Claim::safe("one sale per request_id"),
        clock_skew: Claim::NOT_APPLICABLE,
        redis_restart: Claim::NOT_APPLICABLE,
        redis_pause: Claim::NOT_APPLICABLE,
        redlock_minority_down: Claim::NOT_APPLICABLE,
        redlock_majority_down: Claim::NOT_APPLICABLE,
        redlock_restart_without_persistence: Claim::NOT_APPLICABLE,
        failover: Claim::safe(words.failover),
        failover_wait_early: Claim::NOT_APPLICABLE,
        failover_wait: Claim::NOT_APPLICABLE,
        crash_before_enqueue: Claim::NOT_APPLICABLE,
        worker_crash_before_ack: Claim::NOT_APPLICABLE,
        postgres_restart: Claim::NOT_APPLICABLE,
        commit_answer_lost: Claim::NOT_APPLICABLE,
        reservation_expiry: Claim::NOT_APPLICABLE,
        redis_data_loss: Claim::NOT_APPLICABLE,
    }
}

/// The `lua` family, as `lua` claims it: one script, no gap and no lock,
/// safe in every scenario that applies.
pub(super) const SCRIPT: Claims = Claims {
    one_instance: Claim::not_applicable("adds nothing to the race"),
    race: Claim::safe(""),
    slow_business: Claim::NOT_APPLICABLE,
    crash_after_acquire: Claim::NOT_APPLICABLE,
    pause_holder: Claim::not_applicable("no gap: one script"),
    kill_instance: Claim::NOT_APPLICABLE,
    lock_vanishes_early: Claim::NOT_APPLICABLE,
    lock_vanishes: Claim::NOT_APPLICABLE,
    retry_storm: Claim::safe("one sale per request_id"),
    clock_skew: Claim::NOT_APPLICABLE,
    redis_restart: Claim::recovers(""),
    redis_pause: Claim::safe("every unknown id resolves"),
    redlock_minority_down: Claim::NOT_APPLICABLE,
    redlock_majority_down: Claim::NOT_APPLICABLE,
    redlock_restart_without_persistence: Claim::NOT_APPLICABLE,
    failover: Claim::not_applicable("no lock"),
    failover_wait_early: Claim::NOT_APPLICABLE,
    failover_wait: Claim::NOT_APPLICABLE,
    crash_before_enqueue: Claim::NOT_APPLICABLE,
    worker_crash_before_ack: Claim::NOT_APPLICABLE,
    postgres_restart: Claim::NOT_APPLICABLE,
    commit_answer_lost: Claim::NOT_APPLICABLE,
    reservation_expiry: Claim::NOT_APPLICABLE,
    redis_data_loss: Claim::NOT_APPLICABLE,
};

/// The scripts whose sales become orders (`lua-then-queue`,
/// `lua-stream`): the order's way to PostgreSQL has scenarios of its own.
/// How the order leaves the sale (`crash_before_enqueue`) is each one's.
pub(super) const SCRIPT_WITH_ORDERS: Claims = Claims {
    redis_pause: Claim::NOT_APPLICABLE,
    worker_crash_before_ack: Claim::safe("redelivered, inserted once"),
    postgres_restart: Claim::safe("orders wait in the stream"),
    reservation_expiry: Claim::safe("each unpaid unit returned once"),
    redis_data_loss: Claim::loses_units(
        "in-flight orders go with Redis; reconcile says LEDGER_LOST",
    ),
    ..SCRIPT
};

/// Claims common to the database's variants in the scenarios whose fault
/// cannot reach a stock kept in PostgreSQL.
const NOT_IN_REDIS: &str = "the stock is in PostgreSQL";

/// The database's variants when a commit's answer is lost: the buyer is
/// told `unknown`, and its id's record answers its retry.
const ANSWERED_ON_RETRY: &str = "unknown, then its id's record";

/// The database's variants when PostgreSQL crashes under their buyers.
const SURVIVES_A_CRASH: &str = "committed or rolled back; each id resolves";

/// Why a dead holder's database lock frees itself: its transaction is
/// rolled back, and its lock released, as its connection closes.
const DIES_WITH_ITS_CONNECTION: &str = "the transaction dies with its connection";

/// The database's variants, as `pg-update` claims it: the stock is in
/// PostgreSQL, out of reach of Redis's faults, and every id resolves
/// through a crash of the database or a lost answer.
pub(super) const DATABASE: Claims = Claims {
    one_instance: Claim::not_applicable("adds nothing to the race"),
    race: Claim::safe(""),
    slow_business: Claim::NOT_APPLICABLE,
    crash_after_acquire: Claim::NOT_APPLICABLE,
    pause_holder: Claim::NOT_APPLICABLE,
    kill_instance: Claim::NOT_APPLICABLE,
    lock_vanishes_early: Claim::not_applicable(NOT_IN_REDIS),
    lock_vanishes: Claim::not_applicable(NOT_IN_REDIS),
    retry_storm: Claim::safe("one sale per request_id"),
    clock_skew: Claim::not_applicable("no lease"),
    redis_restart: Claim::not_applicable(NOT_IN_REDIS),
    redis_pause: Claim::not_applicable(NOT_IN_REDIS),
    redlock_minority_down: Claim::NOT_APPLICABLE,
    redlock_majority_down: Claim::NOT_APPLICABLE,
    redlock_restart_without_persistence: Claim::NOT_APPLICABLE,
    failover: Claim::not_applicable(NOT_IN_REDIS),
    failover_wait_early: Claim::NOT_APPLICABLE,
    failover_wait: Claim::NOT_APPLICABLE,
    crash_before_enqueue: Claim::NOT_APPLICABLE,
    worker_crash_before_ack: Claim::NOT_APPLICABLE,
    postgres_restart: Claim::safe(SURVIVES_A_CRASH),
    commit_answer_lost: Claim::safe(ANSWERED_ON_RETRY),
    reservation_expiry: Claim::NOT_APPLICABLE,
    redis_data_loss: Claim::not_applicable(NOT_IN_REDIS),
};

/// The claims of the database's locks (`pg-for-update`, `pg-advisory`),
/// one for both: a lock its transaction holds, freed when its holder's
/// connection closes, or when the database has not heard from it for its
/// lease (the session's idle timeout) (their model: `check/model/transaction.rs`).
/// `slow_business`: why the work stays under the lock, in the variant's words.
pub(super) const fn transaction_lock(slow_business: &'static str) -> Claims {
    Claims {
        slow_business: Claim::safe(slow_business),
        crash_after_acquire: Claim::frees(DIES_WITH_ITS_CONNECTION),
        pause_holder: Claim::safe(
            "the database ends a silent holder's session within its lease: its late write is refused",
        ),
        kill_instance: Claim::frees(DIES_WITH_ITS_CONNECTION),
        ..DATABASE
    }
}

/// What a lock variant is (`local-mutex`, the Redis locks, Redlock, etcd,
/// ZooKeeper): the seller claims its ids, its answers are counted in
/// Redis, its requests wait for a lock.
pub(super) const LOCK_FACTS: Facts = Facts {
    scripted: false,
    stock_in_postgres: false,
    orders: false,
    takes_lock: true,
    buckets: 0,
    needs: None,
};

/// What a script variant is (`lua` and those built on it): the whole sale
/// one script, which checks its own ids.
pub(super) const SCRIPT_FACTS: Facts = Facts {
    scripted: true,
    stock_in_postgres: false,
    orders: false,
    takes_lock: false,
    buckets: 0,
    needs: None,
};

/// What a database variant is (`pg-*`, `redis-then-pg`): its stock, its
/// ids and its books in PostgreSQL.
pub(super) const DATABASE_FACTS: Facts = Facts {
    scripted: false,
    stock_in_postgres: true,
    orders: false,
    takes_lock: false,
    buckets: 0,
    needs: None,
};
