//! The judges of PostgreSQL's faults under the variants whose stock it
//! keeps: a crash under a buyer held before its write (`postgres-restart`),
//! and a commit's answer lost on its way back (`commit-answer-lost`). Each
//! buyer then asked again with its request id, as in `redis-pause`.

use std::time::Duration;

use super::doubt::{decide, resolve};
use super::{Doubted, Judgement, Ledger, Observed, said_of};
use crate::pgstock::both::BothBooks;
use crate::said;
use crate::variants::Behaviour;
use crate::wire::Said;

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
    pub restarted: Result<(u32, Duration), Said>,
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
    let again = match &c.restarted {
        Ok((pid, after)) => {
            let after = after.as_secs_f64();
            said!(
                ", started again as pid {pid} {after:.2} s later",
                ",{after:.2} s 后重新启动,PID {pid}"
            )
        }
        Err(why) => said_of!(" ({})", "({})"; why),
    };
    let (cut, open, held_id) = (&c.cut, c.open, &c.held);
    let (buyers, in_doubt) = (c.buyers.len(), r.in_doubt);
    let evidence = said_of!(
        "{cut}'s commit answer lost; PostgreSQL killed (postmaster and backends, {open} transactions open) with {held_id} held before its write{}; \
         {buyers} buyers with request ids, {in_doubt} without a final answer at first; {}; {}{}",
        "{cut} 的提交应答丢失;PostgreSQL 被杀死(主进程和所有后端进程,{open} 个事务未结束),此时 {held_id} 被挡在写入之前{};\
         {buyers} 个带 request_id 的买家,起初 {in_doubt} 个没有得到最终应答;{};{}{}";
        again,
        r.said,
        c.ledger.said(),
        both_said(c.both.as_ref())
    );
    if let Err(why) = &c.restarted {
        return Judgement::inconclusive(why, evidence);
    }
    let Some(cut) = c.buyers.iter().find(|b| b.id == c.cut && b.first.unknown) else {
        let why = said!(
            "{cut}'s commit answer was not lost",
            "{cut} 的提交应答没有丢失"
        );
        return Judgement::inconclusive(&why, evidence);
    };
    match held {
        None => {
            return Judgement::inconclusive(&said!("no held buyer", "没有被挡住的买家"), evidence);
        }
        Some(b) if b.first.is_final() => {
            let why = said_of!(
                "the held buyer's attempt outlived the crash ({})",
                "被挡住的买家的尝试在崩溃后依然存活({})";
                b.first.answer_said()
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

/// A piece of SQL with its keywords in capitals (`insert into stock_sales`:
/// `INSERT INTO stock_sales`), as the Chinese shows it: the same SQL.
fn sql_in_capitals(sql: &str) -> String {
    sql.split(' ')
        .map(|word| match word.contains('_') {
            true => word.to_owned(),
            false => word.to_uppercase(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether a buyer whose commit surely ran (its answer lost after the
/// server answered) was sold a unit anew on retry: its id has two sales.
fn sold_anew(b: &Doubted) -> bool {
    b.resolved()
        .is_some_and(|reply| reply.sold() && !reply.replayed)
}

/// The two books in words, when the variant keeps both.
fn both_said(both: Option<&BothBooks>) -> Said {
    let Some(b) = both else {
        return Said::default();
    };
    let verdict = if b.agree {
        said!("both books agree", "两本账一致")
    } else {
        b.verdict_said()
    };
    let (redis, sold, back) = (b.redis_remaining, b.redis_sold, b.redis_returned);
    let (pg, pg_sold) = (b.pg_remaining, b.pg_sold);
    said_of!(
        "; drained until sold out: Redis {redis} left, {sold} sold, {back} given back; the database {pg} left, {pg_sold} sold: {}",
        ";一直卖到售罄:Redis 剩 {redis},卖出 {sold},退回 {back};数据库剩 {pg},卖出 {pg_sold}:{}";
        verdict
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
            let left = b.pg_remaining;
            let evidence = said_of!(
                "{}; a buyer was told sold out with {left} unit(s) left in the database",
                "{};数据库里还剩 {left} 件时,有买家被告知售罄";
                judged.evidence
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
    let told = match armed {
        Some(b) => {
            let then = match b.resolved() {
                Some(reply) => reply.answer_said(),
                None => said!("no final answer", "没有最终应答"),
            };
            said_of!("told {}, then {}", "先被告知 {},然后 {}"; b.first.answer_said(), then)
        }
        None => said!("no such buyer", "没有这个买家"),
    };
    let (name, buyers) = (&l.armed, l.buyers.len());
    let sql = Said {
        en: format!("{:?}", l.sql),
        zh: format!("{:?}", sql_in_capitals(l.sql)),
    };
    let evidence = said_of!(
        "the answer of {name}'s statement with {} lost on its way back ({}); {buyers} buyers with request ids; {}; {}{}",
        "{name} 含 {} 的语句的应答在返回途中丢失({});{buyers} 个带 request_id 的买家;{};{}{}";
        sql,
        told,
        r.said,
        l.ledger.said(),
        both_said(l.both.as_ref())
    );
    let Some(armed) = armed else {
        return Judgement::inconclusive(&said!("no armed buyer", "没有设置好故障的买家"), evidence);
    };
    if !armed.first.unknown {
        let why = said_of!(
            "the armed cut did not strike (the buyer was told {})",
            "预设的切断没有生效(买家被告知 {})";
            armed.first.answer_said()
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
