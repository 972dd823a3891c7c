//! The branches of the judges the other tests do not reach, each said in
//! both languages (its judgement checked by [`said_in_both`] as it is
//! made), and the sentences the judges read: answers, ledgers, the books'
//! verdicts, the history checker's second opinion.

use super::*;
use crate::pgstock::both::BothBooks;
use crate::wire::Reconciliation;

#[test]
fn answers_and_ledgers_are_said_in_both() {
    let cases = [
        (reply(0, None, 5), "no answer", "无应答"),
        (
            reply(429, Some("lock_held"), 5),
            "429 lock_held",
            "429 lock_held",
        ),
        (reply(200, None, 5), "200 sold", "200 已售出"),
        (reply(409, None, 5), "409", "409"),
        (
            Reply {
                unknown: true,
                ..reply(503, None, 5)
            },
            "503 unknown",
            "503 结果未知",
        ),
        (
            Reply {
                replayed: true,
                ..reply(200, None, 5)
            },
            "200 sold (replayed)",
            "200 已售出(重放)",
        ),
    ];
    for (reply, en, zh) in cases {
        let answer = reply.answer_said();
        assert_eq!((answer.en.as_str(), answer.zh.as_str()), (en, zh));
        assert_eq!(reply.to_string(), format!("{en} after 0.01 s"));
        assert_eq!(reply.said().zh, format!("{zh}(用时 0.01 s)"));
    }
    let mut overlapped = ledger(state(5, 3, 3));
    overlapped.overlaps = 1;
    overlapped.overlap_example = Some(said!("a#1 with b#2", "a#1 与 b#2"));
    overlapped.timeline = Some("/tmp/lab/race-token.html".to_owned());
    let said = overlapped.said();
    assert_eq!(said.en, overlapped.to_string());
    assert!(
        said.en.contains(" (e.g. a#1 with b#2), sold 3 of 5"),
        "{}",
        said.en
    );
    assert!(said.en.ends_with("; timeline /tmp/lab/race-token.html"));
    said_in_both(&said);
}

fn reply_of(status: u16, took_ms: u64) -> Reply {
    reply(status, None, took_ms)
}

#[test]
fn the_crowd_and_the_duel_say_every_branch_in_both() {
    // Nobody sold: the slow business never got going.
    let judged = slow_business(&ledger(state(5, 5, 0)), None);
    assert!(judged.evidence.en.starts_with("no buyer got through"));
    let judged = one_instance(&ledger(state(5, 5, 0)), None);
    said_in_both(&judged.evidence);
    // A failover whose newcomer did not sell, after the holder.
    let f = Failover {
        fault: said!("master killed", "主节点被杀死"),
        landed: Ok(()),
        holder: reply_of(200, 10),
        newcomer: reply(429, Some("lock_held"), 10),
        newcomer_after_holder: true,
        replication: Replication::NotAsked,
        ledger: ledger(state(5, 4, 1)),
    };
    let judged = failover(&f);
    assert_eq!(judged.observed, Observed::Inconclusive);
    assert!(
        judged
            .evidence
            .en
            .contains("the newcomer 429 lock_held: the lock was not shown")
    );
    // A database lock's two trials, both ended in time.
    let pause = Duration::from_millis(1500);
    let ended = Duel {
        entered: true,
        holder: reply(429, Some("lock_lost"), 1510),
        newcomer: reply_of(200, 420),
        ledger: ledger(state(5, 4, 1)),
    };
    let judged = silent_holder(&ended, &ended, pause, Duration::from_millis(300));
    assert_eq!(judged.observed, Observed::Seen(Safe));
    assert!(
        judged
            .evidence
            .en
            .starts_with("frozen: froze 1.5 s; holder answered")
    );
    assert!(
        judged
            .evidence
            .zh
            .contains(";然后与 PostgreSQL 断开了 1.5 s;")
    );
}

#[test]
fn recoveries_and_lost_ledgers_say_every_branch_in_both() {
    let held_on = LockState {
        held: true,
        holder: Some("a#3".to_owned()),
        ttl_ms: Some(400),
        no_ttl: false,
    };
    let judged = recovery(&Recovery {
        death: said!("instance a killed", "实例 a 被杀死"),
        held: None,
        restarted: None,
        next: reply_of(0, 2000),
        window: Duration::from_secs(2),
        lock: held_on,
    });
    assert!(
        judged
            .evidence
            .en
            .contains("lock after: held by a#3 for 400 ms more")
    );
    let between = BetweenStores {
        death: said!("instance a killed", "实例 a 被杀死"),
        at_write: true,
        killed: reply_of(0, 10),
        restarted: None,
        next: reply_of(409, 5),
        books: None,
    };
    assert_eq!(observed(between_stores(&between)), Observed::Inconclusive);
    let unbooked = BetweenStores {
        restarted: Some(7),
        ..between
    };
    let judged = between_stores(&unbooked);
    assert!(judged.evidence.en.starts_with("no books to read: "));

    // Reconcile saw the lost ledger, but not all its orders, or too many.
    let books = Books {
        fault: said!("Redis lost its data", "Redis 丢失了数据"),
        landed: Ok(()),
        struck: None,
        books: Reconciliation {
            initial: 10,
            sold: 3,
            stock: 7,
            pending_payment: 3,
            ledger_lost: true,
            orphaned: 1,
            orphaned_epochs: vec![1],
            ..Reconciliation::default()
        },
        settled: Ok(()),
        refused: Vec::new(),
        returned_again: 0,
        earned: Ok(()),
    };
    let lost = LostLedger {
        books,
        written_before: 2,
        in_flight: 0,
        sold_after: 3,
        orders: 5,
    };
    let judged = ledger_lost(&lost);
    assert!(
        judged
            .evidence
            .en
            .starts_with("1 orphaned orders, not the 2")
    );
    let mut more = lost.clone();
    more.books.books.orphaned = 2;
    more.orders = 6;
    let judged = ledger_lost(&more);
    assert!(
        judged
            .evidence
            .en
            .starts_with("a sale with no order or two")
    );
    let mut clean = more;
    clean.orders = 5;
    assert_eq!(observed(ledger_lost(&clean)), Observed::Seen(Safe));
}

/// A buyer told `status` first, then `retries`.
fn doubted(id: &str, first: Reply, retries: Vec<Reply>) -> Doubted {
    Doubted {
        id: id.to_owned(),
        first,
        retries,
    }
}

#[test]
fn the_database_judges_say_every_branch_in_both() {
    let unknown = Reply {
        unknown: true,
        ..reply(503, None, 1000)
    };
    let crash = DatabaseCrash {
        held: "c-3".to_owned(),
        cut: "c-2".to_owned(),
        open: 1,
        restarted: Ok((42, Duration::from_millis(900))),
        buyers: vec![doubted("c-2", unknown.clone(), Vec::new())],
        ledger: ledger(state(10, 9, 1)),
        both: None,
    };
    let judged = database_crash(&crash);
    assert!(
        judged
            .evidence
            .en
            .starts_with("no held buyer: c-2's commit answer lost")
    );
    assert!(
        judged
            .evidence
            .en
            .contains(", started again as pid 42 0.90 s later;")
    );

    let lost = LostAnswer {
        armed: "l-2".to_owned(),
        sql: "commit",
        buyers: vec![doubted("l-2", unknown, Vec::new())],
        ledger: ledger(state(10, 9, 1)),
        both: None,
    };
    let judged = commit_answer_lost(&lost);
    assert!(
        judged
            .evidence
            .en
            .contains("(told 503 unknown, then no final answer)")
    );
    let nobody = LostAnswer {
        armed: "l-9".to_owned(),
        ..lost
    };
    let judged = commit_answer_lost(&nobody);
    assert!(judged.evidence.en.starts_with("no armed buyer: "));
    assert!(judged.evidence.en.contains("(no such buyer)"));
}

#[test]
fn the_books_verdicts_are_said_in_both() {
    let mut r = Reconciliation {
        initial: 10,
        sold: 5,
        stock: 6,
        lost: vec![1],
        phantom: vec![2],
        ordered_twice: vec![3],
        unreturned: vec![4],
        returned_unexpired: (1..=10).collect(),
        stock_drift: 1,
        in_flight: 2,
        order_conflicts: 1,
        ..Reconciliation::default()
    };
    let said = r.verdict_said();
    assert_eq!(said.en, r.verdict());
    assert!(
        said.en
            .contains("10 returned, not expired (units 1, 2, 3, 4, 5, 6, 7, 8, and 2 more)")
    );
    said_in_both(&said);
    r.ledger_lost = true;
    said_in_both(&r.verdict_said());
    let clean = Reconciliation {
        order_conflicts: 1,
        ..Reconciliation::default()
    };
    said_in_both(&clean.verdict_said());
    let books = |pg_remaining, redis_remaining, agree| BothBooks {
        sku: "redis-then-pg".to_owned(),
        redis_remaining,
        redis_sold: 1,
        redis_returned: 0,
        pg_remaining,
        pg_sold: 1,
        pg_oversold: 0,
        agree,
    };
    for b in [
        books(0, 0, true),
        books(1, 0, false),
        books(0, 1, false),
        books(0, 0, false),
    ] {
        let said = b.verdict_said();
        assert_eq!(said.en, b.verdict());
        said_in_both(&said);
    }
}

#[test]
fn the_second_opinion_is_said_in_both() {
    use crate::history::{Recorder, Verdict};
    let verdicts = [
        Verdict::Linearizable,
        Verdict::NotLinearizable,
        Verdict::Undecided,
        Verdict::Unsafe,
    ];
    let behaviours = [
        Safe,
        Oversells,
        Deadlock,
        Frees,
        Recovers,
        KeepsSelling,
        Busy,
        LosesUnits,
    ];
    let seen = behaviours.map(Observed::Seen);
    let others = [
        Observed::Stuck,
        Observed::LedgerBroken,
        Observed::Inconclusive,
        Observed::Error,
    ];
    for observed in seen.into_iter().chain(others) {
        assert!(!observed.name_zh().is_empty());
        for verdict in verdicts {
            for nothing_recorded in [false, true] {
                let why = crate::judge::second::disagree(observed, verdict, nothing_recorded);
                if let Some(why) = why {
                    said_in_both(&why);
                }
            }
        }
    }
    let summary =
        crate::judge::second::summary(Verdict::Linearizable, 12, &crate::wire::Said::default());
    assert_eq!(
        (summary.en.as_str(), summary.zh.as_str()),
        ("linearizable (12 ops)", "可线性化(12 个操作)")
    );
    let summary = crate::judge::second::summary(
        Verdict::Unsafe,
        3,
        &crate::said!("unit 5 was sold 2 times", "第 5 件被卖出了 2 次"),
    );
    assert_eq!(summary.en, "unsafe (3 ops): unit 5 was sold 2 times");
    assert!(summary.zh.starts_with("不安全(3 个操作):"));
    // Nothing recorded: linearizable, and the two judges cannot agree.
    let second = crate::judge::second::second_opinion(&Recorder::new(), Observed::Seen(Safe));
    said_in_both(&second.summary);
    said_in_both(&second.disagreement.unwrap());
}
