//! The faults of the database under the variants whose stock PostgreSQL
//! keeps: `postgres-restart`, the database crashes (every process of it
//! killed at once) after a sale whose commit's answer was lost and under
//! a buyer held at its gate right before its write, inside its
//! transaction for the database's locks, and `up` starts it again on its
//! data; `commit-answer-lost`, a sale's commit is run and its
//! answer lost on the way back. Each buyer then asks again with its
//! request id until it has a final answer. And `kill-instance` under
//! `redis-then-pg`: an instance killed between its buyer's unit taken in
//! Redis and its write in the database. And `pause-holder` under the
//! database's locks: the holder frozen, then cut off from PostgreSQL.

use std::time::{Duration, Instant};

use anyhow::Context;

use super::play::{self, query};
use super::redis_pause::retry_until_final;
use crate::check::protocol::{Program, Protocol};
use crate::gate::{Scheduler, buyer_name, points};
use crate::judge::{self, DatabaseCrash, Doubted, Judgement, LostAnswer, said_of};
use crate::lab::Lab;
use crate::pgstock::both::BothBooks;
use crate::said;
use crate::variants::Variant;
use crate::wire::ChaosAction;

/// The SKU's stock, the buyers served before the crash (one at a time),
/// and those sent while the held one waits at its gate (they queue behind
/// its lock, or sell around it).
const STOCK: i64 = 10;
const BEFORE: usize = 2;
const ALONGSIDE: usize = 3;
/// How long the held buyer may take to reach its write, and `up` to start
/// PostgreSQL again.
const GATE_TIMEOUT: Duration = Duration::from_secs(10);
const RESTART_TIMEOUT: Duration = Duration::from_secs(30);
/// How many times a buyer asks again at most, and the back-off between
/// two rounds (a client's: nothing announces when the database is back
/// for an instance's pool).
const RETRIES: usize = 10;
const RETRY_BACKOFF: Duration = Duration::from_millis(300);

/// Two sales; a third on instance a whose commit runs and whose answer
/// the instance's relay loses (told unknown); a buyer with a schedule held
/// at `before_write` on instance a (for `pg-for-update` and `pg-advisory` with the lock and its
/// transaction open) and three more sent through nginx; PostgreSQL killed
/// (postmaster and backends, SIGKILL: a crash, not a shutdown); `up`
/// starts it again; the held buyer let go onto a connection that died;
/// then every buyer without a final answer asks again with its id.
pub(super) async fn crash(lab: &mut Lab, variant: Variant) -> anyhow::Result<Judgement> {
    let v = variant.name();
    lab.client().reset(v, STOCK, 0).await?;
    let id = |i: usize| format!("{v}-crash-{i}");
    let path = |i: usize| query(v, &format!("request_id={}", id(i)));
    let mut buyers = one_by_one(lab, &lab.stack.url, 0..BEFORE, (&id, &path)).await?;

    // A sale committed whose answer is lost on its way back (its
    // connection closed): its record must survive the crash to come.
    let cut = BEFORE;
    let sql = committing_sql(variant).to_owned();
    lab.chaos_on(0, &ChaosAction::LoseCommitAnswer { sql })
        .await?;
    let on_a = &lab.instance(0).url;
    buyers.extend(one_by_one(lab, on_a, cut..cut + 1, (&id, &path)).await?);

    // The held buyer, at its gate before the write.
    let run = format!("lab-crash-{v}-{}", std::process::id());
    let mut gates = Scheduler::start(&lab.redis_url, &run).await?;
    let held_id = cut + 1;
    let held = lab.send(
        &lab.instance(0).url,
        &format!("{}&schedule={run}:{}", path(held_id), buyer_name(0)),
    );
    let at_write = gates
        .run_to(points::BEFORE_WRITE.name, GATE_TIMEOUT)
        .await?
        .context("the held buyer never reached its write")?;
    let alongside: Vec<_> = (held_id + 1..=held_id + ALONGSIDE)
        .map(|i| (i, lab.send(&lab.stack.url, &path(i))))
        .collect();

    // The crash, and the database back on its data.
    let old = lab
        .stack
        .postgres
        .clone()
        .context("the stack's PostgreSQL (its pid)")?;
    let open = open_transactions(&old.url).await.unwrap_or(0);
    crate::os::kill_with_children(old.pid);
    let crashed = Instant::now();
    let back = lab
        .stack
        .next_line("postgres: pid", RESTART_TIMEOUT)
        .await
        .and_then(|_| lab.stack.postgres.clone())
        .filter(|p| p.pid != old.pid);
    let down_for = crashed.elapsed();
    gates.release(&at_write).await?;
    gates.abandon().await?;
    buyers.push(Doubted {
        id: id(held_id),
        first: held.await?,
        retries: Vec::new(),
    });
    for (i, reply) in alongside {
        buyers.push(Doubted {
            id: id(i),
            first: reply.await?,
            retries: Vec::new(),
        });
    }
    retry_until_final(lab, &mut buyers, &path, (RETRIES, RETRY_BACKOFF)).await?;
    let both = drain(lab, variant, &mut buyers).await?;
    Ok(judge::database_crash(&DatabaseCrash {
        held: id(held_id),
        cut: id(cut),
        open,
        restarted: back.map(|p| (p.pid, down_for)).ok_or_else(|| {
            said!(
                "`up` did not start PostgreSQL again within {RESTART_TIMEOUT:?}",
                "PostgreSQL 没有在 {RESTART_TIMEOUT:?} 内被重新启动"
            )
        }),
        buyers,
        ledger: lab.ledger(v).await?,
        both,
    }))
}

/// `commit-answer-lost`: two sales; instance a's relay to PostgreSQL
/// armed to lose the answer of the next statement that commits a sale
/// (`COMMIT` for the database's locks, whose sale is a transaction; the
/// sale's own statement for the others, each its own transaction); a
/// buyer with a request id on instance a; two more sales; then each
/// buyer without a final answer asks again with its id.
pub(super) async fn commit_answer_lost(lab: &Lab, variant: Variant) -> anyhow::Result<Judgement> {
    let v = variant.name();
    lab.client().reset(v, STOCK, 0).await?;
    let id = |i: usize| format!("{v}-lost-{i}");
    let path = |i: usize| query(v, &format!("request_id={}", id(i)));
    let mut buyers = one_by_one(lab, &lab.stack.url, 0..BEFORE, (&id, &path)).await?;
    let sql = committing_sql(variant);
    let armed = BEFORE;
    lab.chaos_on(
        0,
        &ChaosAction::LoseCommitAnswer {
            sql: sql.to_owned(),
        },
    )
    .await?;
    let on_a = &lab.instance(0).url;
    buyers.extend(one_by_one(lab, on_a, armed..armed + 1, (&id, &path)).await?);
    buyers.extend(one_by_one(lab, &lab.stack.url, armed + 1..armed + 3, (&id, &path)).await?);
    retry_until_final(lab, &mut buyers, &path, (RETRIES, RETRY_BACKOFF)).await?;
    let both = drain(lab, variant, &mut buyers).await?;
    Ok(judge::commit_answer_lost(&LostAnswer {
        armed: id(armed),
        sql,
        buyers,
        ledger: lab.ledger(v).await?,
        both,
    }))
}

/// `pause-holder` for a database lock, whose lease is its transaction's
/// idle timeout: the holder frozen as for every lock, then a holder cut
/// off from PostgreSQL as long ([`cut_off`]); the database must end each
/// silent session within the lease.
pub(super) async fn silent_holder(lab: &Lab, variant: Variant) -> anyhow::Result<Judgement> {
    let v = variant.name();
    let (frozen, pause) = play::frozen_holder(lab, v).await?;
    let cut = cut_off(lab, v, &play::holder_query(v), pause).await?;
    Ok(judge::silent_holder(
        &frozen,
        &cut,
        pause,
        play::HOLDER_LEASE,
    ))
}

/// `pause-holder`'s second trial for a database lock: a buyer on instance
/// a (`buyer`: its knobs) held at its gate right before its write, its
/// lock had and its transaction open; instance a's relay to PostgreSQL
/// cut off for `pause` (a partition: nothing closed, nothing carried);
/// the holder let go, its write held in the partition; a newcomer on
/// instance b waiting for the lock. The duel, for the judge.
async fn cut_off(lab: &Lab, v: &str, buyer: &str, pause: Duration) -> anyhow::Result<judge::Duel> {
    lab.client().reset(v, 5, 0).await?;
    let run = format!("lab-cut-{v}-{}", std::process::id());
    let mut gates = Scheduler::start(&lab.redis_url, &run).await?;
    let holder = lab.send(
        &lab.instance(0).url,
        &format!("{buyer}&schedule={run}:{}", buyer_name(0)),
    );
    let at_write = gates
        .run_to(points::BEFORE_WRITE.name, GATE_TIMEOUT)
        .await?;
    if let Some(at_write) = &at_write {
        let ms = pause.as_millis() as u64;
        lab.chaos_on(0, &ChaosAction::PartitionPostgres { ms })
            .await?;
        gates.release(at_write).await?;
    }
    gates.abandon().await?;
    let newcomer = lab.send(&lab.instance(1).url, buyer).await?;
    Ok(judge::Duel {
        entered: at_write.is_some(),
        holder: holder.await?,
        newcomer,
        ledger: lab.ledger(v).await?,
    })
}

/// The statement that commits `variant`'s sale: `COMMIT` for the
/// database's locks and `pg-batch`, whose sale is a transaction; the
/// sale's own statement for the others, each its own transaction.
fn committing_sql(variant: Variant) -> &'static str {
    match Protocol::of(variant).program {
        Program::Transaction | Program::Batch => "commit",
        _ => "insert into stock_sales",
    }
}

/// For a variant whose stock both stores keep (`redis-then-pg`), once
/// every buyer was answered: more buyers, one by one through nginx, until
/// one is told sold out (at most the stock and one more), then Redis's
/// books beside the database's. The stack's ledger shows the database's
/// alone (the truth), so a unit Redis lost track of in the fault (taken
/// there, never sold in the database) would not be seen there: drained,
/// the database must have sold it to a buyer Redis turned away, and the
/// two books meet at zero. The drain's buyers join `buyers`. `None` for
/// the other variants.
async fn drain(
    lab: &Lab,
    variant: Variant,
    buyers: &mut Vec<Doubted>,
) -> anyhow::Result<Option<BothBooks>> {
    if variant != Variant::RedisThenPg {
        return Ok(None);
    }
    let v = variant.name();
    for i in 0..=STOCK {
        let id = format!("{v}-drain-{i}");
        let first = lab
            .send(&lab.stack.url, &query(v, &format!("request_id={id}")))
            .await?;
        let sold_out = first.status == 409;
        buyers.push(Doubted {
            id,
            first,
            retries: Vec::new(),
        });
        if sold_out {
            break;
        }
    }
    both_books(lab, v).await.map(Some)
}

/// Redis's books of SKU `v` beside the database's.
async fn both_books(lab: &Lab, v: &str) -> anyhow::Result<BothBooks> {
    let postgres = lab
        .stack
        .postgres
        .as_ref()
        .context("the stack's PostgreSQL")?;
    let db = crate::orders::connect(&postgres.url).await?;
    let mut conn = lab.store.conn().await.context("cannot reach Redis")?;
    let sku = crate::knobs::Sku::parse(v)?;
    let books = crate::pgstock::both::both(&mut conn, &db, &sku).await?;
    books.with_context(|| format!("the database never stocked {sku}"))
}

/// Buyers `range`, one after the other, each sent to `base` with its
/// request id (`id(i)`, at `path(i)`), and their answers.
async fn one_by_one(
    lab: &Lab,
    base: &str,
    range: std::ops::Range<usize>,
    (id, path): (&dyn Fn(usize) -> String, &dyn Fn(usize) -> String),
) -> anyhow::Result<Vec<Doubted>> {
    let mut buyers = Vec::new();
    for i in range {
        buyers.push(Doubted {
            id: id(i),
            first: lab.send(base, &path(i)).await?,
            retries: Vec::new(),
        });
    }
    Ok(buyers)
}

/// Transactions open in the database (other than this one's): the held
/// buyer's, for the database's locks, at the moment of the crash.
async fn open_transactions(url: &str) -> anyhow::Result<i64> {
    let client = crate::orders::connect(url).await?;
    let row = client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE xact_start IS NOT NULL AND pid <> pg_backend_pid() AND datname = current_database()",
            &[],
        )
        .await?;
    Ok(row.try_get(0)?)
}

/// `kill-instance` for `redis-then-pg`, whose buyer holds no lock: stock
/// 1; a buyer on the victim instance held at its gate before its write,
/// its unit taken in Redis and the database read; the victim killed
/// (SIGKILL), between the two stores; then a buyer on the other instance,
/// whom Redis turns away, must be sold the database's unit.
pub(super) async fn kill_between_stores(
    lab: &mut Lab,
    variant: Variant,
) -> anyhow::Result<Judgement> {
    let v = variant.name();
    lab.client().reset(v, 1, 0).await?;
    let (victim, other) = lab.next_victim();
    let run = format!("lab-kill-{v}-{}", std::process::id());
    let mut gates = Scheduler::start(&lab.redis_url, &run).await?;
    let killed = lab.send(
        &victim.url,
        &query(v, &format!("schedule={run}:{}", buyer_name(0))),
    );
    let at_write = gates
        .run_to(points::BEFORE_WRITE.name, GATE_TIMEOUT)
        .await?
        .is_some();
    crate::os::signal(victim.pid, nix::sys::signal::Signal::SIGKILL);
    let killed = killed.await?;
    gates.abandon().await?;
    let next = lab.send(&other.url, &query(v, "work_ms=0")).await?;
    let restarted = lab.restarted(&victim).await;
    let books = Some(both_books(lab, v).await?);
    let (name, pid) = (&victim.name, victim.pid);
    let buyer = match at_write {
        true => said!(
            "at its write, its unit taken in Redis",
            "正处在写入处,它的那件已在 Redis 中扣下"
        ),
        false => said!("never seen at its write", "从未被看到到达写入处"),
    };
    Ok(judge::between_stores(&judge::BetweenStores {
        death: said_of!(
            "instance {name} (pid {pid}) killed with SIGKILL, its buyer {} (its request: {})",
            "实例 {name}(PID {pid})被 SIGKILL 杀死,它的买家{}(它的请求:{})";
            buyer,
            killed.answer_said()
        ),
        at_write,
        killed,
        restarted,
        next,
        books,
    }))
}
