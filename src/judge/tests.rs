//! The judges against hand-made evidence: each decides in the documented
//! order (landed, the ledger, earned) and tells its behaviours apart.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::variants::Behaviour::*;
use crate::wire::{LockState, StateSnapshot};

fn state(initial: i64, remaining: i64, sold: i64) -> StateSnapshot {
    StateSnapshot::counted(initial, remaining, sold)
}

fn ledger(state: StateSnapshot) -> Ledger {
    Ledger {
        state,
        ..Ledger::default()
    }
}

fn reply(status: u16, reason: Option<&str>, took_ms: u64) -> Reply {
    Reply {
        status,
        reason: reason.map(str::to_owned),
        replayed: false,
        unknown: false,
        unit: None,
        took: Duration::from_millis(took_ms),
    }
}

fn observed(judgement: Judgement) -> Observed {
    judgement.observed
}

#[test]
fn race_needs_both_instances() {
    let mut both = state(50, 0, 50);
    both.per_instance = [("a".into(), 200), ("b".into(), 200)].into();
    assert_eq!(
        observed(race(&ledger(both.clone()), None)),
        Observed::Seen(Safe)
    );

    let mut oversold = state(50, 0, 53);
    oversold.per_instance = both.per_instance.clone();
    assert_eq!(
        observed(race(&ledger(oversold), None)),
        Observed::Seen(Oversells)
    );

    let mut alone = state(50, 0, 50);
    alone.per_instance = [("a".into(), 400), ("b".into(), 0)].into();
    let judgement = race(&ledger(alone), None);
    assert_eq!(judgement.observed, Observed::Inconclusive);
    assert!(judgement.evidence.contains("no race between instances"));

    let mut broken = state(50, 10, 30);
    broken.per_instance = both.per_instance;
    assert_eq!(
        observed(race(&ledger(broken), None)),
        Observed::LedgerBroken
    );
}

#[test]
fn one_instance_needs_exactly_one() {
    let mut alone = state(50, 0, 50);
    alone.per_instance = [("a".into(), 400), ("b".into(), 0)].into();
    assert_eq!(
        observed(one_instance(&ledger(alone.clone()), None)),
        Observed::Seen(Safe)
    );
    let mut oversold = state(50, 0, 61);
    oversold.per_instance = alone.per_instance.clone();
    assert_eq!(
        observed(one_instance(&ledger(oversold), None)),
        Observed::Seen(Oversells)
    );
    let mut both = alone;
    both.per_instance = [("a".into(), 200), ("b".into(), 200)].into();
    let judgement = one_instance(&ledger(both), None);
    assert_eq!(judgement.observed, Observed::Inconclusive);
    assert!(
        judgement.evidence.contains("not one process"),
        "{}",
        judgement.evidence
    );
}

#[test]
fn race_shows_under_selling() {
    let mut undersold = state(50, 45, 5);
    undersold.busy = 395;
    undersold.per_instance = [("a".into(), 200), ("b".into(), 200)].into();
    let judgement = race(&ledger(undersold.clone()), Some("fails fast"));
    assert_eq!(judgement.observed, Observed::Seen(Safe));
    assert!(
        judgement
            .evidence
            .contains("unsold 45 while 395 buyers were refused: fails fast")
    );
    let unexpected = race(&ledger(undersold), None);
    assert!(
        unexpected
            .evidence
            .contains("refused: not expected of this variant")
    );
}

#[test]
fn slow_business_is_safe_only_when_renewed() {
    let mut renewed = state(5, 2, 3);
    renewed.renewals = 12;
    assert_eq!(
        observed(slow_business(&ledger(renewed), None)),
        Observed::Seen(Safe)
    );
    assert_eq!(
        observed(slow_business(&ledger(state(5, 3, 3)), None)),
        Observed::Seen(Oversells)
    );
    assert_eq!(
        observed(slow_business(&ledger(state(5, 2, 3)), None)),
        Observed::Inconclusive
    );
}

#[test]
fn slow_business_without_a_lease_is_safe_only_when_the_lock_outlived_one() {
    let held = |sections, longest_ms| Ledger {
        sections,
        longest_ms,
        ..ledger(state(5, 2, 3))
    };
    assert_eq!(
        observed(slow_business(&held(3, 650), Some(200))),
        Observed::Seen(Safe)
    );
    // Work shorter than a lease, or one buyer alone, proves nothing.
    assert_eq!(
        observed(slow_business(&held(3, 150), Some(200))),
        Observed::Inconclusive
    );
    assert_eq!(
        observed(slow_business(&held(1, 650), Some(200))),
        Observed::Inconclusive
    );
}

fn duel(holder: Reply, newcomer: Reply, state: StateSnapshot) -> Duel {
    Duel {
        entered: true,
        holder,
        newcomer,
        ledger: ledger(state),
    }
}

const PAUSE: Duration = Duration::from_millis(1500);

#[test]
fn pause_holder_is_safe_only_when_the_stale_write_was_refused() {
    let mut refused = state(5, 4, 1);
    refused.fenced_rejections = 1;
    let fenced = duel(
        reply(429, Some("stale_token"), 1510),
        reply(200, None, 320),
        refused,
    );
    assert_eq!(
        observed(pause_holder(&fenced, PAUSE, false)),
        Observed::Seen(Safe)
    );

    let watchdog = duel(
        reply(200, None, 1510),
        reply(200, None, 320),
        state(5, 4, 2),
    );
    assert_eq!(
        observed(pause_holder(&watchdog, PAUSE, false)),
        Observed::Seen(Oversells)
    );

    // Safe by the ledger, but the newcomer only waited its turn.
    let waited = duel(
        reply(200, None, 1510),
        reply(200, None, 1520),
        state(5, 3, 2),
    );
    assert_eq!(
        observed(pause_holder(&waited, PAUSE, false)),
        Observed::Inconclusive
    );

    // A lock with no lease: the newcomer waiting out the frozen holder's
    // transaction is the lock holding, safe; one that did not wait is not.
    assert_eq!(
        observed(pause_holder(&waited, PAUSE, true)),
        Observed::Seen(Safe)
    );
    let early = duel(
        reply(200, None, 1510),
        reply(200, None, 320),
        state(5, 3, 2),
    );
    assert_ne!(
        observed(pause_holder(&early, PAUSE, true)),
        Observed::Seen(Safe)
    );

    // Not frozen: the pause never landed, whatever the ledger says.
    let quick = duel(reply(200, None, 20), reply(200, None, 320), state(5, 4, 2));
    assert_eq!(
        observed(pause_holder(&quick, PAUSE, false)),
        Observed::Inconclusive
    );

    let never = Duel {
        entered: false,
        ..fenced
    };
    let judgement = pause_holder(&never, PAUSE, false);
    assert_eq!(judgement.observed, Observed::Inconclusive);
    assert!(judgement.evidence.contains("never entered its section"));
}

#[test]
fn clock_skew_is_safe_only_when_the_skewed_instance_was_refused() {
    let refused = duel(
        reply(200, None, 500),
        reply(429, Some("lock_held"), 3),
        state(5, 4, 1),
    );
    assert_eq!(observed(clock_skew(&refused, 5000)), Observed::Seen(Safe));
    let stolen = duel(reply(200, None, 500), reply(200, None, 3), state(5, 4, 2));
    assert_eq!(
        observed(clock_skew(&stolen, 5000)),
        Observed::Seen(Oversells)
    );
    assert_eq!(observed(clock_skew(&refused, 0)), Observed::Inconclusive);
    // Safe, but the newcomer came after the holder was done.
    let late = duel(reply(200, None, 500), reply(200, None, 3), state(5, 3, 2));
    assert_eq!(observed(clock_skew(&late, 5000)), Observed::Inconclusive);
}

#[test]
fn a_forgotten_lock_is_safe_only_when_the_stale_write_was_refused() {
    let pause = Duration::from_secs(4);
    let mut refused = state(5, 4, 1);
    refused.fenced_rejections = 1;
    let fenced = duel(
        reply(429, Some("stale_token"), 4010),
        reply(200, None, 10),
        refused,
    );
    assert_eq!(
        observed(forgotten_lock(&fenced, "deleted", &Ok(()), pause)),
        Observed::Seen(Safe)
    );
    let redlock = duel(reply(200, None, 4010), reply(200, None, 10), state(5, 4, 2));
    assert_eq!(
        observed(forgotten_lock(&redlock, "node 3 restarted", &Ok(()), pause)),
        Observed::Seen(Oversells)
    );
    let still_there = Err("node 3 still answers after SIGKILL".to_owned());
    assert_eq!(
        observed(forgotten_lock(
            &redlock,
            "node 3 restarted",
            &still_there,
            pause
        )),
        Observed::Inconclusive
    );
}

fn recovered(next: Reply, lock: LockState) -> Recovery {
    Recovery {
        death: "instance a (pid 12) killed with SIGKILL".to_owned(),
        held: Some("announced from inside its section"),
        restarted: Some(34),
        next,
        window: Duration::from_secs(2),
        lock,
    }
}

#[test]
fn recovery_tells_frees_from_deadlock_from_stuck() {
    let frees = recovered(reply(200, None, 1004), LockState::default());
    assert_eq!(observed(recovery(&frees)), Observed::Seen(Frees));

    let orphaned = LockState {
        held: true,
        holder: Some("1".to_owned()),
        ttl_ms: None,
        no_ttl: true,
    };
    let deadlock = recovered(reply(429, Some("wait_timed_out"), 2000), orphaned.clone());
    let judgement = recovery(&deadlock);
    assert_eq!(judgement.observed, Observed::Seen(Deadlock));
    assert!(judgement.evidence.contains("held with no TTL"));

    let late = recovered(reply(200, None, 2600), LockState::default());
    assert_eq!(observed(recovery(&late)), Observed::Stuck);

    let alive = Recovery {
        restarted: None,
        ..frees.clone()
    };
    assert_eq!(observed(recovery(&alive)), Observed::Inconclusive);
    let never_held = Recovery {
        held: None,
        ..recovered(reply(429, Some("wait_timed_out"), 2000), orphaned)
    };
    assert_eq!(observed(recovery(&never_held)), Observed::Inconclusive);
}

/// A buyer killed between Redis and the database: the next buyer sold the
/// database's unit, or was told sold out while the database held it.
#[test]
fn between_stores_tells_keeps_selling_from_loses_units() {
    let books = |pg_remaining, pg_sold| crate::pgstock::both::BothBooks {
        sku: "redis-then-pg".to_owned(),
        redis_remaining: 0,
        redis_sold: 1,
        redis_returned: 0,
        pg_remaining,
        pg_sold,
        pg_oversold: 0,
        agree: pg_sold == 1,
    };
    let sold = BetweenStores {
        death: "instance a killed".to_owned(),
        at_write: true,
        killed: reply(0, None, 10),
        restarted: Some(12),
        next: reply(200, None, 5),
        books: Some(books(0, 1)),
    };
    let judgement = between_stores(&sold);
    assert_eq!(judgement.observed, Observed::Seen(KeepsSelling));
    assert!(
        judgement
            .evidence
            .contains("database remaining 0, sold 1: agree")
    );
    let told = BetweenStores {
        next: reply(409, None, 5),
        books: Some(books(1, 0)),
        ..sold.clone()
    };
    assert_eq!(observed(between_stores(&told)), Observed::Seen(LosesUnits));
    let answered = BetweenStores {
        killed: reply(200, None, 10),
        ..sold
    };
    assert_eq!(observed(between_stores(&answered)), Observed::Inconclusive);
}

#[test]
fn retry_storm_counts_sales_of_one_request_id() {
    let answers: BTreeMap<String, usize> = [("200 sold".to_owned(), 16)].into_iter().collect();
    let mut once = state(5, 4, 1);
    once.replays = 15;
    assert_eq!(
        observed(retry_storm(&answers, &ledger(once))),
        Observed::Seen(Safe)
    );
    assert_eq!(
        observed(retry_storm(&answers, &ledger(state(5, 3, 2)))),
        Observed::Seen(Oversells)
    );
    // One sale, but no retry ever met another attempt.
    assert_eq!(
        observed(retry_storm(&answers, &ledger(state(5, 4, 1)))),
        Observed::Inconclusive
    );
}

#[test]
fn redis_restart_needs_a_503_while_down() {
    let down = reply(503, Some("store_unavailable"), 2);
    let back = Some(Duration::from_millis(300));
    assert_eq!(
        observed(redis_restart(&down, back)),
        Observed::Seen(Recovers)
    );
    assert_eq!(observed(redis_restart(&down, None)), Observed::Stuck);
    assert_eq!(
        observed(redis_restart(&reply(200, None, 2), back)),
        Observed::Inconclusive
    );
}

#[test]
fn redlock_minority_and_majority_down() {
    let killed = Ok(());
    assert_eq!(
        observed(minority_down(&killed, &ledger(state(50, 0, 50)))),
        Observed::Seen(KeepsSelling)
    );
    assert_eq!(
        observed(minority_down(&killed, &ledger(state(50, 0, 52)))),
        Observed::Seen(Oversells)
    );
    assert_eq!(
        observed(minority_down(&killed, &ledger(state(50, 30, 20)))),
        Observed::Stuck
    );
    let alive = Err("node 4 still answers after SIGKILL".to_owned());
    assert_eq!(
        observed(minority_down(&alive, &ledger(state(50, 0, 50)))),
        Observed::Inconclusive
    );

    let busy = MajorityDown {
        fast: reply(429, Some("no_quorum"), 101),
        waited: reply(429, Some("no_quorum"), 500),
        selling_again_after: Some(Duration::from_millis(40)),
        ledger: ledger(state(5, 4, 1)),
    };
    assert_eq!(
        observed(majority_down(&killed, &busy)),
        Observed::Seen(Busy)
    );
    let sold_anyway = MajorityDown {
        fast: reply(200, None, 3),
        ..busy.clone()
    };
    assert_eq!(
        observed(majority_down(&killed, &sold_anyway)),
        Observed::Seen(KeepsSelling)
    );
    let never_back = MajorityDown {
        selling_again_after: None,
        ..busy.clone()
    };
    assert_eq!(
        observed(majority_down(&killed, &never_back)),
        Observed::Stuck
    );
    assert_eq!(
        observed(majority_down(&alive, &busy)),
        Observed::Inconclusive
    );
}
