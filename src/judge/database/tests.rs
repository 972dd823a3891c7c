//! The database's judges (`postgres-restart`, `commit-answer-lost`)
//! against hand-made evidence.

use std::time::Duration;

use crate::judge::Observed;
use crate::judge::database::*;
use crate::judge::doubt::tests::{observed, reply};
use crate::judge::{Doubted, Ledger, Reply};
use crate::variants::Behaviour::*;
use crate::wire::StateSnapshot;

/// Sold at 200.
fn sold(unit: i64) -> Reply {
    Reply {
        unit: Some(unit),
        ..reply(200, 5)
    }
}

/// `n` buyers `{prefix}-{i}`, each sold unit `10 - i`, except the third,
/// whose commit's answer was lost (told unknown), and whose retry replayed
/// its unit (8).
fn third_answer_lost(prefix: &str, n: i64) -> Vec<Doubted> {
    let mut buyers: Vec<Doubted> = (0..n)
        .map(|i| Doubted {
            id: format!("{prefix}-{i}"),
            first: sold(10 - i),
            retries: Vec::new(),
        })
        .collect();
    buyers[2].first = Reply {
        unknown: true,
        ..reply(503, 5)
    };
    buyers[2].retries = vec![Reply {
        replayed: true,
        ..sold(8)
    }];
    buyers
}

/// A `postgres-restart` cell of a database variant as it should go: two
/// sold before, the third's commit answer lost (unknown, its record
/// replayed on retry), the held buyer answered 503 by the crash, then
/// sold on retry (unit 7), three more sold; 7 sales in the books.
fn crashed_sale() -> DatabaseCrash {
    let mut buyers = third_answer_lost("c", 7);
    buyers[3].first = reply(503, 5);
    buyers[3].retries = vec![sold(7)];
    DatabaseCrash {
        held: "c-3".to_owned(),
        cut: "c-2".to_owned(),
        open: 1,
        restarted: Ok((4242, Duration::from_millis(150))),
        buyers,
        ledger: Ledger {
            state: StateSnapshot::counted(10, 3, 7),
            ..Ledger::default()
        },
        both: None,
    }
}

/// `redis-then-pg`'s two books after [`crashed_sale`] and the drain:
/// Redis took 11 units and was given one back (the held buyer's,
/// refused by the crash), the database sold all 10.
fn both_books() -> BothBooks {
    BothBooks {
        sku: "redis-then-pg".to_owned(),
        redis_remaining: 0,
        redis_sold: 11,
        redis_returned: 1,
        pg_remaining: 0,
        pg_sold: 10,
        pg_oversold: 0,
        agree: true,
    }
}

/// A variant whose stock both stores keep is safe only when, drained
/// until a buyer was told sold out, the database has nothing left and
/// the two books meet.
#[test]
fn a_database_crash_drained_with_stock_left_in_the_database_loses_units() {
    let mut agreeing = crashed_sale();
    agreeing.both = Some(both_books());
    let safe = database_crash(&agreeing);
    assert_eq!(safe.observed, Observed::Seen(Safe), "{}", safe.evidence);
    assert!(
        safe.evidence.en.ends_with(
            "; drained until sold out: Redis 0 left, 11 sold, 1 given back; the database 0 left, 10 sold: both books agree"
        ),
        "{}",
        safe.evidence
    );
    let mut lied = agreeing.clone();
    lied.both = Some(BothBooks {
        redis_returned: 0,
        pg_remaining: 1,
        pg_sold: 9,
        agree: false,
        ..both_books()
    });
    let judged = database_crash(&lied);
    assert_eq!(judged.observed, Observed::Seen(LosesUnits));
    assert!(
        judged.evidence.en.ends_with(
            "Redis is 1 unit(s) short of the database (under-sold); a buyer was told sold out with 1 unit(s) left in the database"
        ),
        "{}",
        judged.evidence
    );
    let mut apart = agreeing.clone();
    apart.both = Some(BothBooks {
        redis_returned: 0,
        agree: false,
        ..both_books()
    });
    assert_eq!(observed(database_crash(&apart)), Observed::LedgerBroken);
    // An oversell stays an oversell, whatever the books say.
    let mut twice = lied;
    twice.buyers[3].retries[0].unit = Some(9);
    assert_eq!(observed(database_crash(&twice)), Observed::Seen(Oversells));
}

#[test]
fn a_database_crash_is_safe_when_it_struck_and_every_id_resolved_once() {
    let safe = database_crash(&crashed_sale());
    assert_eq!(safe.observed, Observed::Seen(Safe), "{}", safe.evidence);
    assert!(
        safe.evidence.en.starts_with("c-2's commit answer lost; PostgreSQL killed")
            && safe.evidence.en.contains("2 without a final answer at first; on retry 1 replayed their record and 1 were decided anew"),
        "{}",
        safe.evidence
    );

    // The held buyer's retry told the unit another buyer had.
    let mut twice = crashed_sale();
    twice.buyers[3].retries[0].unit = Some(9);
    assert_eq!(observed(database_crash(&twice)), Observed::Seen(Oversells));

    // The cut buyer's retry, with no record of its id, sold again.
    let mut again = crashed_sale();
    again.buyers[2].retries = vec![Reply {
        unit: Some(4),
        ..reply(200, 5)
    }];
    again.ledger.state = StateSnapshot::counted(10, 2, 8);
    assert_eq!(observed(database_crash(&again)), Observed::Seen(Oversells));

    // The held buyer never got a final answer.
    let mut stuck = crashed_sale();
    stuck.buyers[3].retries = vec![reply(503, 5)];
    assert_eq!(observed(database_crash(&stuck)), Observed::Stuck);

    // A sale in the books nobody was told of.
    let mut lost = crashed_sale();
    lost.buyers[3].retries = vec![reply(409, 5)];
    assert_eq!(observed(database_crash(&lost)), Observed::Seen(LosesUnits));
}

#[test]
fn a_database_crash_proves_nothing_unless_it_struck_and_the_database_came_back() {
    let mut outlived = crashed_sale();
    outlived.buyers[3].first = outlived.buyers[3].retries.remove(0);
    let judgement = database_crash(&outlived);
    assert_eq!(judgement.observed, Observed::Inconclusive);
    assert!(
        judgement
            .evidence
            .en
            .starts_with("the held buyer's attempt outlived the crash")
    );

    let mut answered = crashed_sale();
    answered.buyers[2].first = answered.buyers[2].retries.remove(0);
    let judgement = database_crash(&answered);
    assert_eq!(judgement.observed, Observed::Inconclusive);
    assert!(
        judgement
            .evidence
            .en
            .starts_with("c-2's commit answer was not lost")
    );

    let mut down = crashed_sale();
    down.restarted = Err(crate::said!(
        "`up` did not start PostgreSQL again",
        "PostgreSQL 没有被重新启动"
    ));
    assert_eq!(observed(database_crash(&down)), Observed::Inconclusive);
}

/// `commit-answer-lost` as it should go: two sold, the armed buyer told
/// unknown and then replayed its unit (8), two more sold.
fn lost_answer() -> LostAnswer {
    let buyers = third_answer_lost("l", 5);
    LostAnswer {
        armed: "l-2".to_owned(),
        sql: "commit",
        buyers,
        ledger: Ledger {
            state: StateSnapshot::counted(10, 5, 5),
            ..Ledger::default()
        },
        both: None,
    }
}

#[test]
fn a_lost_commit_answer_is_safe_when_the_retry_replays_the_sale() {
    let safe = commit_answer_lost(&lost_answer());
    assert_eq!(safe.observed, Observed::Seen(Safe), "{}", safe.evidence);
    assert!(
        safe.evidence
            .en
            .contains("told 503 unknown, then 200 sold (replayed)"),
        "{}",
        safe.evidence
    );

    // The retry found no record and sold again: two units to one id.
    let mut anew = lost_answer();
    anew.buyers[2].retries[0].replayed = false;
    assert_eq!(
        observed(commit_answer_lost(&anew)),
        Observed::Seen(Oversells)
    );

    // The cut did not strike: the armed buyer heard its answer.
    let mut heard = lost_answer();
    heard.buyers[2].first = heard.buyers[2].retries.remove(0);
    let judgement = commit_answer_lost(&heard);
    assert_eq!(judgement.observed, Observed::Inconclusive);
    assert!(
        judgement
            .evidence
            .en
            .starts_with("the armed cut did not strike")
    );

    // The books hold a sale nobody was told of.
    let mut lost = lost_answer();
    lost.ledger.state = StateSnapshot::counted(10, 4, 6);
    assert_eq!(
        observed(commit_answer_lost(&lost)),
        Observed::Seen(LosesUnits)
    );
}
