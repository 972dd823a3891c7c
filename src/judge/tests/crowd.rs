//! The crowd's judges (`race`, one instance, `slow-business`,
//! `retry-storm`): many buyers, judged from the ledger.

use super::*;

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
    assert!(judgement.evidence.en.contains("no race between instances"));

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
        judgement.evidence.en.contains("not one process"),
        "{}",
        judgement.evidence
    );
}

#[test]
fn race_shows_under_selling() {
    let mut undersold = state(50, 45, 5);
    undersold.busy = 395;
    undersold.per_instance = [("a".into(), 200), ("b".into(), 200)].into();
    let fails_fast = Reason {
        en: "fails fast",
        zh: "快速失败",
    };
    let judgement = race(&ledger(undersold.clone()), Some(&fails_fast));
    assert_eq!(judgement.observed, Observed::Seen(Safe));
    assert!(
        judgement
            .evidence
            .en
            .contains("unsold 45 while 395 buyers were refused: fails fast")
    );
    let unexpected = race(&ledger(undersold), None);
    assert!(
        unexpected
            .evidence
            .en
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

#[test]
fn retry_storm_counts_sales_of_one_request_id() {
    let answers = vec![reply(200, None, 5); 16];
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
