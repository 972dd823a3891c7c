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
