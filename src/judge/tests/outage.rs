//! The outage's judges: a store that went away (`redis-restart`,
//! Redlock's nodes).

use super::*;

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
    let alive = Err(said!(
        "node 4 still answers after SIGKILL",
        "SIGKILL 之后节点 4 仍在应答"
    ));
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
