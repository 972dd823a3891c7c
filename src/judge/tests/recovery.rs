//! The recovery's judges: a holder that died and the buyer after it, and
//! a buyer killed between Redis and the database.

use super::*;

fn recovered(next: Reply, lock: LockState) -> Recovery {
    Recovery {
        death: said!(
            "instance a (pid 12) killed with SIGKILL",
            "实例 a(PID 12)被 SIGKILL 杀死"
        ),
        held: Some(Recovery::announced()),
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
    assert!(judgement.evidence.en.contains("held with no TTL"));

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
        death: said!("instance a killed", "实例 a 被杀死"),
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
            .en
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
