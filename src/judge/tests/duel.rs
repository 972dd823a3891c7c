//! The duel's judges: a holder struck inside its section and a newcomer
//! (`pause-holder`, `clock-skew`, a forgotten lock).

use super::*;

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
        observed(pause_holder(&fenced, PAUSE, None)),
        Observed::Seen(Safe)
    );

    let watchdog = duel(
        reply(200, None, 1510),
        reply(200, None, 320),
        state(5, 4, 2),
    );
    assert_eq!(
        observed(pause_holder(&watchdog, PAUSE, None)),
        Observed::Seen(Oversells)
    );

    // Safe by the ledger, but the newcomer only waited its turn.
    let waited = duel(
        reply(200, None, 1510),
        reply(200, None, 1520),
        state(5, 3, 2),
    );
    assert_eq!(
        observed(pause_holder(&waited, PAUSE, None)),
        Observed::Inconclusive
    );

    // A database lock, its session's lease 300 ms: the database ended the
    // frozen holder's session, the newcomer sold within the lease and the
    // slack, the holder's late write refused. Safe; a newcomer that waited
    // the freeze out (no idle timeout), or a holder whose write landed, is not.
    let lease = Some(Duration::from_millis(300));
    let ended = duel(
        reply(429, Some("lock_lost"), 1510),
        reply(200, None, 420),
        state(5, 4, 1),
    );
    assert_eq!(
        observed(pause_holder(&ended, PAUSE, lease)),
        Observed::Seen(Safe)
    );
    // The newcomer sold only after the freeze: the SKU was stuck while
    // its holder was silent.
    let judgement = pause_holder(&waited, PAUSE, lease);
    assert_eq!(judgement.observed, Observed::Stuck);
    assert!(
        judgement
            .evidence
            .en
            .starts_with("the database never ended the silent holder's session"),
        "{}",
        judgement.evidence
    );
    // Ended in time, but the holder's late write landed anyway.
    let landed = duel(
        reply(200, None, 1510),
        reply(200, None, 420),
        state(5, 3, 2),
    );
    let judgement = pause_holder(&landed, PAUSE, lease);
    assert_ne!(judgement.observed, Observed::Seen(Safe));
    assert!(
        judgement
            .evidence
            .en
            .contains("its late write was not refused"),
        "{}",
        judgement.evidence
    );
    let slow = duel(
        reply(429, Some("lock_lost"), 1510),
        reply(200, None, 1_450),
        state(5, 4, 1),
    );
    let judgement = pause_holder(&slow, PAUSE, lease);
    assert_ne!(judgement.observed, Observed::Seen(Safe));
    assert!(
        judgement
            .evidence
            .en
            .contains("did not sell within the lease (300 ms) and 500 ms"),
        "{}",
        judgement.evidence
    );

    // Not frozen: the pause never landed, whatever the ledger says.
    let quick = duel(reply(200, None, 20), reply(200, None, 320), state(5, 4, 2));
    assert_eq!(
        observed(pause_holder(&quick, PAUSE, None)),
        Observed::Inconclusive
    );

    let never = Duel {
        entered: false,
        ..fenced
    };
    let judgement = pause_holder(&never, PAUSE, None);
    assert_eq!(judgement.observed, Observed::Inconclusive);
    assert!(judgement.evidence.en.contains("never entered its section"));
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
    let deleted = said!("deleted", "锁被删除");
    let restarted = said!("node 3 restarted", "节点 3 重启");
    let mut refused = state(5, 4, 1);
    refused.fenced_rejections = 1;
    let fenced = duel(
        reply(429, Some("stale_token"), 4010),
        reply(200, None, 10),
        refused,
    );
    assert_eq!(
        observed(forgotten_lock(&fenced, &deleted, &Ok(()), pause)),
        Observed::Seen(Safe)
    );
    let redlock = duel(reply(200, None, 4010), reply(200, None, 10), state(5, 4, 2));
    assert_eq!(
        observed(forgotten_lock(&redlock, &restarted, &Ok(()), pause)),
        Observed::Seen(Oversells)
    );
    let still_there = Err(said!(
        "node 3 still answers after SIGKILL",
        "SIGKILL 之后节点 3 仍在应答"
    ));
    assert_eq!(
        observed(forgotten_lock(&redlock, &restarted, &still_there, pause)),
        Observed::Inconclusive
    );
}
