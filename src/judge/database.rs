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
    /// The buyer whose commit ran and whose answer was lost just before
    /// the crash: its record must survive the restart.
    pub cut: String,
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
        "{}'s commit answer lost; PostgreSQL killed (postmaster and backends, {} transactions open) with {} held before its write{}; \
         {} buyers with request ids, {} without a final answer at first; {}; {}",
        c.cut,
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
    let Some(cut) = c.buyers.iter().find(|b| b.id == c.cut && b.first.unknown) else {
        let why = format!("{}'s commit answer was not lost", c.cut);
        return Judgement::inconclusive(&why, evidence);
    };
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
    if sold_anew(cut) {
        return Judgement::seen(Behaviour::Oversells, evidence);
    }
    apart(c.both.as_ref(), decide(&r, &c.ledger, evidence))
}

/// Whether a buyer whose commit surely ran (its answer lost after the
/// server answered) was sold a unit anew on retry: its id has two sales.
fn sold_anew(b: &Doubted) -> bool {
    b.resolved()
        .is_some_and(|reply| reply.sold() && !reply.replayed)
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
    if sold_anew(armed) {
        return Judgement::seen(Behaviour::Oversells, evidence);
    }
    apart(l.both.as_ref(), decide(&r, &l.ledger, evidence))
}

#[cfg(test)]
mod tests;
