//! The judges of PostgreSQL's faults under the variants whose stock it
//! keeps: a crash under a buyer held before its write (`postgres-restart`),
//! and a commit's answer lost on its way back (`commit-answer-lost`). Each
//! buyer then asked again with its request id, as in `redis-pause`.

use std::time::Duration;

use super::doubt::{decide, resolve};
use super::{Doubted, Judgement, Ledger, Observed, Reply};
use crate::pgstock::both::BothBooks;
use crate::variants::Behaviour;

/// What `postgres-restart` saw of a variant whose stock PostgreSQL keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatabaseCrash {
    /// The buyer held before its write when PostgreSQL was killed.
    pub held: String,
    /// Transactions open in the database at that moment.
    pub open: i64,
    /// PostgreSQL started again: its new pid, and how long after the kill
    /// `up` said so; why not, if it did not.
    pub restarted: Result<(u32, Duration), String>,
    /// Every buyer, the held one among them, with its retries.
    pub buyers: Vec<Doubted>,
    /// The SKU's books (the database's) once every retry was answered.
    pub ledger: Ledger,
    /// Redis's books beside the database's, for a variant whose stock
    /// both keep (`redis-then-pg`).
    pub both: Option<BothBooks>,
}

/// Safe when the crash landed on the held buyer (its attempt died with the
/// database: no final answer), PostgreSQL came back, every id then
/// resolved, no unit went to two buyers, and the buyers told "sold" are
/// exactly the sales the database's books hold.
pub fn database_crash(c: &DatabaseCrash) -> Judgement {
    let r = resolve(&c.buyers, &c.ledger, |first| !first.is_final());
    let held = c.buyers.iter().find(|b| b.id == c.held);
    let evidence = format!(
        "PostgreSQL killed (postmaster and backends, {} transactions open) with {} held before its write{}; \
         {} buyers with request ids, {} without a final answer at first; {}; {}",
        c.open,
        c.held,
        match &c.restarted {
            Ok((pid, after)) => format!(
                ", started again as pid {pid} {:.2} s later",
                after.as_secs_f64()
            ),
            Err(why) => format!(" ({why})"),
        },
        c.buyers.len(),
        r.in_doubt,
        r.said,
        c.ledger,
    ) + &both_said(c.both.as_ref());
    if let Err(why) = &c.restarted {
        return Judgement::inconclusive(why, evidence);
    }
    match held {
        None => return Judgement::inconclusive("no held buyer", evidence),
        Some(b) if b.first.is_final() => {
            let why = format!(
                "the held buyer's attempt outlived the crash ({})",
                b.first.answer()
            );
            return Judgement::inconclusive(&why, evidence);
        }
        Some(_) => {}
    }
    apart(c.both.as_ref(), decide(&r, &c.ledger, evidence))
}

/// The two books in words, when the variant keeps both.
fn both_said(both: Option<&BothBooks>) -> String {
    let Some(b) = both else {
        return String::new();
    };
    format!(
        "; drained until sold out: Redis {} left, {} sold, {} given back; the database {} left, {} sold: {}",
        b.redis_remaining,
        b.redis_sold,
        b.redis_returned,
        b.pg_remaining,
        b.pg_sold,
        if b.agree {
            "both books agree".to_owned()
        } else {
            b.verdict()
        }
    )
}

/// A cell judged safe of a variant whose stock both stores keep, drained
/// until a buyer was told sold out, fails when the database still holds
/// stock (that buyer was lied to: under-selling, a unit Redis lost track
/// of and the database never sold), or when the two books did not meet
/// (Redis's books cannot be trusted).
fn apart(both: Option<&BothBooks>, judged: Judgement) -> Judgement {
    match both {
        Some(b) if judged.observed == Observed::Seen(Behaviour::Safe) && b.pg_remaining > 0 => {
            let evidence = format!(
                "{}; a buyer was told sold out with {} unit(s) left in the database",
                judged.evidence, b.pg_remaining
            );
            Judgement::seen(Behaviour::LosesUnits, evidence)
        }
        Some(b) if judged.observed == Observed::Seen(Behaviour::Safe) && !b.agree => {
            Judgement::new(Observed::LedgerBroken, judged.evidence)
        }
        _ => judged,
    }
}

/// What `commit-answer-lost` saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostAnswer {
    /// The buyer whose statement's answer the relay was armed to lose.
    pub armed: String,
    /// The piece of SQL the relay watched for.
    pub sql: &'static str,
    /// Every buyer, the armed one among them, with its retries.
    pub buyers: Vec<Doubted>,
    /// The SKU's books (the database's) once every retry was answered.
    pub ledger: Ledger,
    /// Redis's books beside the database's (see [`DatabaseCrash::both`]).
    pub both: Option<BothBooks>,
}

/// Safe when the armed buyer was told `unknown` (its commit run, its
/// answer lost), asking again with its id replayed the sale the database
/// had committed, no unit went to two buyers, and the buyers told "sold"
/// are exactly the database's sales. A retry decided anew means the id's
/// record was missing: the one buyer would have two units (oversells).
pub fn commit_answer_lost(l: &LostAnswer) -> Judgement {
    let r = resolve(&l.buyers, &l.ledger, |first| !first.is_final());
    let armed = l.buyers.iter().find(|b| b.id == l.armed);
    let evidence = format!(
        "the answer of {}'s statement with {:?} lost on its way back ({}); {} buyers with request ids; {}; {}",
        l.armed,
        l.sql,
        match armed {
            Some(b) => format!(
                "told {}, then {}",
                b.first.answer(),
                b.resolved()
                    .map_or("no final answer".to_owned(), Reply::answer)
            ),
            None => "no such buyer".to_owned(),
        },
        l.buyers.len(),
        r.said,
        l.ledger,
    ) + &both_said(l.both.as_ref());
    let Some(armed) = armed else {
        return Judgement::inconclusive("no armed buyer", evidence);
    };
    if !armed.first.unknown {
        let why = format!(
            "the armed cut did not strike (the buyer was told {})",
            armed.first.answer()
        );
        return Judgement::inconclusive(&why, evidence);
    }
    if armed
        .resolved()
        .is_some_and(|reply| reply.sold() && !reply.replayed)
    {
        return Judgement::seen(Behaviour::Oversells, evidence);
    }
    apart(l.both.as_ref(), decide(&r, &l.ledger, evidence))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::judge::Observed;
    use crate::judge::doubt::tests::{observed, reply};
    use crate::variants::Behaviour::*;
    use crate::wire::StateSnapshot;

    /// A `postgres-restart` cell of a database variant as it should go: two
    /// sold before, the held buyer answered 503 by the crash, then sold on
    /// retry (unit 8), three more sold; 6 sales in the books.
    fn crashed_sale() -> DatabaseCrash {
        let sold = |unit: i64| Reply {
            unit: Some(unit),
            ..reply(200, 5)
        };
        let mut buyers: Vec<Doubted> = (0..6)
            .map(|i| Doubted {
                id: format!("c-{i}"),
                first: sold(10 - i),
                retries: Vec::new(),
            })
            .collect();
        buyers[2].first = reply(503, 5);
        buyers[2].retries = vec![sold(8)];
        buyers[5].first = sold(5);
        DatabaseCrash {
            held: "c-2".to_owned(),
            open: 1,
            restarted: Ok((4242, Duration::from_millis(150))),
            buyers,
            ledger: Ledger {
                state: StateSnapshot::counted(10, 4, 6),
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
            safe.evidence.ends_with(
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
            judged.evidence.ends_with(
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
        twice.buyers[2].retries[0].unit = Some(9);
        assert_eq!(observed(database_crash(&twice)), Observed::Seen(Oversells));
    }

    #[test]
    fn a_database_crash_is_safe_when_it_struck_and_every_id_resolved_once() {
        let safe = database_crash(&crashed_sale());
        assert_eq!(safe.observed, Observed::Seen(Safe), "{}", safe.evidence);
        assert!(
            safe.evidence.contains("1 without a final answer at first; on retry 0 replayed their record and 1 were decided anew"),
            "{}",
            safe.evidence
        );

        // The held buyer's retry told the unit another buyer had.
        let mut twice = crashed_sale();
        twice.buyers[2].retries[0].unit = Some(9);
        assert_eq!(observed(database_crash(&twice)), Observed::Seen(Oversells));

        // The held buyer never got a final answer.
        let mut stuck = crashed_sale();
        stuck.buyers[2].retries = vec![reply(503, 5)];
        assert_eq!(observed(database_crash(&stuck)), Observed::Stuck);

        // A sale in the books nobody was told of.
        let mut lost = crashed_sale();
        lost.buyers[2].retries = vec![reply(409, 5)];
        assert_eq!(observed(database_crash(&lost)), Observed::Seen(LosesUnits));
    }

    #[test]
    fn a_database_crash_proves_nothing_unless_it_struck_and_the_database_came_back() {
        let mut outlived = crashed_sale();
        outlived.buyers[2].first = outlived.buyers[2].retries.remove(0);
        let judgement = database_crash(&outlived);
        assert_eq!(judgement.observed, Observed::Inconclusive);
        assert!(
            judgement
                .evidence
                .starts_with("the held buyer's attempt outlived the crash")
        );

        let mut down = crashed_sale();
        down.restarted = Err("`up` did not start PostgreSQL again".to_owned());
        assert_eq!(observed(database_crash(&down)), Observed::Inconclusive);
    }

    /// `commit-answer-lost` as it should go: two sold, the armed buyer told
    /// unknown and then replayed its unit (8), two more sold.
    fn lost_answer() -> LostAnswer {
        let sold = |unit: i64| Reply {
            unit: Some(unit),
            ..reply(200, 5)
        };
        let mut buyers: Vec<Doubted> = (0..5)
            .map(|i| Doubted {
                id: format!("l-{i}"),
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
}
