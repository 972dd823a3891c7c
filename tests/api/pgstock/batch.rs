//! `pg-batch`'s transaction (`pgstock::batch`) against `pg-update`'s one
//! statement, on a real PostgreSQL: a batch must answer each buyer and
//! leave each row exactly as `pg-update` does for the same buyers one
//! after the other, in queue order. On random batches (ids repeated,
//! retried, answered before, claimed by a dead attempt, no id at all, a
//! stock straddled or already oversold, a reset's new epoch), and with the
//! batch's write statement mutated, which must be seen. Then the row's
//! lock: a second batch waits for the first one's commit, and an attempt
//! of an id committed while the batch waited is replayed, not sold again.

use deadpool_postgres::ClientWrapper;
use stocklock::lock::Hook;
use stocklock::orders::Client;
use stocklock::outcome::Outcome;
use stocklock::pgstock::{self, PgAnswer, batch, sale};

use super::gap::{HoldAt, someone_waits};
use super::{BOUND, buyer, migrated};
use crate::helpers::within;
use crate::orders::postgres;

/// Each of `ids` sold by `pg-update` alone, one after the other.
async fn one_by_one(c: &Client, sku: &str, ids: &[Option<String>]) -> Vec<(Outcome, bool)> {
    let mut answers = Vec::new();
    for id in ids {
        let answer = sale::update(c, &buyer(sku, id.as_deref()), &Hook::none())
            .await
            .unwrap();
        answers.push((answer.outcome, answer.replayed));
    }
    answers
}

/// All of `ids` in one batch, written by `write`.
async fn in_one_batch(
    c: &mut ClientWrapper,
    sku: &str,
    ids: &[Option<String>],
    write: &str,
) -> Result<Vec<(Outcome, bool)>, pgstock::PgError> {
    let ids: Vec<Option<&str>> = ids.iter().map(Option::as_deref).collect();
    let answers: Vec<PgAnswer> =
        batch::sell_with(c, (sku, "t"), &ids, &Hook::none(), write).await?;
    Ok(answers
        .into_iter()
        .map(|a| (a.outcome, a.replayed))
        .collect())
}

/// Every row a sale may write of `sku`: the stock's, the sales' and the
/// ids' answers, in order.
async fn rows(c: &Client, sku: &str) -> Vec<String> {
    let mut dump = Vec::new();
    for sql in [
        "SELECT epoch::text, initial::text, remaining::text, sold::text, version::text
         FROM stock WHERE sku = $1",
        "SELECT epoch::text, sale::text, unit::text, coalesce(request_id, '-'), instance
         FROM stock_sales WHERE sku = $1 ORDER BY epoch, sale",
        "SELECT epoch::text, request_id, outcome, coalesce(unit::text, '-'), remaining::text
         FROM stock_requests WHERE sku = $1 ORDER BY epoch, request_id",
    ] {
        for row in c.query(sql, &[&sku]).await.unwrap() {
            let cells: Vec<String> = (0..row.len()).map(|i| row.get(i)).collect();
            dump.push(cells.join(" "));
        }
        dump.push("--".to_owned());
    }
    dump
}

/// A SKU as one random case leaves it before its batch: stocked with
/// `initial` (`epochs` times: the ids of earlier epochs are history), some
/// ids sold to, an attempt of `dead` that wrote its answer and rolled back,
/// the stock then set to `stock` (below zero: another variant oversold).
struct Before {
    initial: i64,
    epochs: usize,
    sold: Vec<Option<String>>,
    dead: Option<String>,
    stock: Option<i64>,
}

async fn prepare(c: &mut Client, sku: &str, before: &Before) {
    for _ in 0..before.epochs {
        pgstock::reset(&*c, sku, before.initial).await.unwrap();
        one_by_one(c, sku, &before.sold).await;
    }
    if let Some(id) = &before.dead {
        let tx = c.transaction().await.unwrap();
        tx.execute(
            "INSERT INTO stock_requests (sku, epoch, request_id, outcome, remaining)
             SELECT sku, epoch, $2::text, 'sold_out', 0 FROM stock WHERE sku = $1
             ON CONFLICT DO NOTHING",
            &[&sku, id],
        )
        .await
        .unwrap();
        tx.rollback().await.unwrap();
    }
    if let Some(stock) = before.stock {
        c.execute(
            "UPDATE stock SET remaining = $2 WHERE sku = $1",
            &[&sku, &stock],
        )
        .await
        .unwrap();
    }
}

/// Plays `cases` random cases with `write` as the batch's statement: the
/// first case whose answers or rows differ from `pg-update`'s, if any,
/// and how many cases reached what they are for (a batch straddling the
/// last units, one replaying, one of a new epoch).
async fn differential(
    c: &mut ClientWrapper,
    cases: usize,
    write: &str,
) -> (Option<String>, [usize; 3]) {
    let mut rng = fastrand::Rng::with_seed(61);
    let mut reached = [0; 3];
    let tag = fastrand::u32(..);
    for case in 0..cases {
        let pool: Vec<String> = (0..6).map(|i| format!("id{i}")).collect();
        let pick = |rng: &mut fastrand::Rng| match rng.u8(..5) {
            0 => None,
            _ => Some(pool[rng.usize(..pool.len())].clone()),
        };
        let initial = rng.i64(1..=8);
        let before = Before {
            initial,
            epochs: rng.usize(1..=2),
            sold: (0..rng.usize(0..3)).map(|_| pick(&mut rng)).collect(),
            dead: rng.bool().then(|| pool[rng.usize(..pool.len())].clone()),
            stock: match rng.u8(..8) {
                0 => Some(-rng.i64(1..=2)),
                1 => Some(0),
                _ => None,
            },
        };
        let ids: Vec<Option<String>> = (0..rng.usize(1..=10)).map(|_| pick(&mut rng)).collect();
        let (one, many) = (format!("one-{tag}-{case}"), format!("many-{tag}-{case}"));
        prepare(c, &one, &before).await;
        prepare(c, &many, &before).await;
        let expected = one_by_one(c, &one, &ids).await;
        let context = format!(
            "case {case}: {initial} units, {} epochs, sold to {:?}, dead {:?}, stock {:?}, batch {ids:?}",
            before.epochs, before.sold, before.dead, before.stock
        );
        let got = match in_one_batch(c, &many, &ids, write).await {
            Ok(got) => got,
            Err(err) => return (Some(format!("{context}: {err}")), reached),
        };
        if got != expected {
            return (
                Some(format!(
                    "{context}: answers {got:?}, pg-update {expected:?}"
                )),
                reached,
            );
        }
        let (a, b) = (rows(c, &one).await, rows(c, &many).await);
        if a != b {
            return (
                Some(format!("{context}: rows {b:?}, pg-update {a:?}")),
                reached,
            );
        }
        let sold = expected
            .iter()
            .any(|(o, r)| !r && matches!(o, Outcome::Sold { .. }));
        let refused = expected
            .iter()
            .any(|(o, r)| !r && matches!(o, Outcome::SoldOut { .. }));
        reached[0] += usize::from(sold && refused);
        reached[1] += usize::from(expected.iter().any(|(_, replayed)| *replayed));
        reached[2] += usize::from(before.epochs > 1 && !before.sold.is_empty());
    }
    (None, reached)
}

#[tokio::test]
async fn a_batch_answers_and_writes_what_pg_update_gives_one_buyer_after_the_other() {
    within(BOUND, async {
        let Some(server) = postgres().await else {
            return;
        };
        migrated(&server).await;
        let pool = pgstock::pool(&server.url(), 1).unwrap();
        let mut c = pool.get().await.unwrap();
        let (differs, reached) = differential(&mut c, 300, batch::WRITE).await;
        assert_eq!(differs, None);
        assert!(
            reached.iter().all(|&n| n > 10),
            "straddling {}, replaying {}, a new epoch {}",
            reached[0],
            reached[1],
            reached[2]
        );
        // The statement mutated, one part at a time: each is seen.
        let mutants = [
            // The stock not decremented.
            (
                "remaining = $2::bigint - $3::bigint",
                "remaining = $2::bigint",
            ),
            // The sold count moved by one for the whole batch.
            ("sold = sold + $3", "sold = sold + 1"),
            // The sales numbered from the wrong end.
            ("s.sold - $3 + u.k", "s.sold - u.k + 1"),
            // Only the sales' answers recorded, not the sold-outs'.
            (
                "AS a(id, outcome, unit, remaining)",
                "AS a(id, outcome, unit, remaining) WHERE a.outcome = 'sold'",
            ),
        ];
        for (part, mutated) in mutants {
            assert!(batch::WRITE.contains(part), "{part}");
            let write = batch::WRITE.replace(part, mutated);
            let (differs, _) = differential(&mut c, 300, &write).await;
            assert!(differs.is_some(), "the mutant {mutated:?} went unseen");
        }
    })
    .await;
}

/// A second batch of the SKU waits for the first one's commit (the row's
/// lock), and then sells the units after the first one's; an attempt of
/// one of its ids that committed while it waited is replayed, not sold
/// again.
#[tokio::test]
async fn a_second_batch_waits_for_the_first_and_replays_an_id_committed_meanwhile() {
    within(BOUND, async {
        let Some(server) = postgres().await else {
            return;
        };
        let admin = migrated(&server).await;
        let sku = "batch-lock";
        pgstock::reset(&admin, sku, 10).await.unwrap();
        let held = HoldAt::new("before_write");
        let first = {
            let (pool, hook) = (
                pgstock::pool(&server.url(), 1).unwrap(),
                Hook::new(held.clone()),
            );
            tokio::spawn(async move {
                let (mut c, ids) = (pool.get().await.unwrap(), [Some("f1"), Some("f2")]);
                batch::sell(&mut c, sku, "a", &ids, &hook).await.unwrap()
            })
        };
        held.arrived.notified().await;
        // The first batch holds the row: the second waits on it.
        let second = {
            let pool = pgstock::pool(&server.url(), 1).unwrap();
            tokio::spawn(async move {
                let (mut c, ids) = (pool.get().await.unwrap(), [Some("s1"), Some("f2"), None]);
                batch::sell(&mut c, sku, "b", &ids, &Hook::none())
                    .await
                    .unwrap()
            })
        };
        someone_waits(&admin, &["tuple", "transactionid"]).await;
        assert!(
            !second.is_finished(),
            "the second batch did not wait for the row"
        );
        held.go.notify_one();
        let first: Vec<Outcome> = first
            .await
            .unwrap()
            .into_iter()
            .map(|a| a.outcome)
            .collect();
        assert_eq!(
            first,
            [
                Outcome::Sold {
                    unit: 10,
                    remaining: 9
                },
                Outcome::Sold {
                    unit: 9,
                    remaining: 8
                }
            ]
        );
        let second = second.await.unwrap();
        let said: Vec<(Outcome, bool)> = second.iter().map(|a| (a.outcome, a.replayed)).collect();
        assert_eq!(
            said,
            [
                (
                    Outcome::Sold {
                        unit: 8,
                        remaining: 7
                    },
                    false
                ),
                (
                    Outcome::Sold {
                        unit: 9,
                        remaining: 8
                    },
                    true
                ),
                (
                    Outcome::Sold {
                        unit: 7,
                        remaining: 6
                    },
                    false
                ),
            ],
            "f2 was answered by the first batch while the second waited"
        );
        let books = pgstock::books(&admin, sku).await.unwrap().unwrap();
        assert_eq!(
            (
                books.sold,
                books.remaining,
                books.oversold,
                books.duplicates
            ),
            (4, 6, 0, 0)
        );
    })
    .await;
}
