//! `redis-then-pg` on a stack with PostgreSQL: Redis takes a unit first and
//! the database decides; a refusal gives the unit back, so `stocklock
//! reconcile --stock` finds the two books agreeing. By concern: here the
//! refused buyer and the race; `ids.rs`, the request ids (an id answered by
//! the database is answered from there without a unit taken in Redis, and
//! every attempt of an id is told its one answer); `lost.rs`, units lost
//! between the two stores (a Redis answer lost, an instance killed between
//! them, a buyer still in flight), where no buyer may be told "sold out"
//! while the database holds stock; `books.rs`, the lab's database faults
//! judged on both books, drained.

mod books;
mod ids;
mod lost;

use std::time::Duration;

use serde_json::Value;
use stocklock::gate::{Arrival, Scheduler};
use stocklock::history::{Recorder, Verdict};

use crate::helpers::{Stack, burst, within};
/// A stack of two instances with PostgreSQL, or `None` when PostgreSQL is
/// missing (which fails under CI).
async fn stack() -> Option<Stack> {
    stack_with(&[]).await
}

/// [`stack`], with `up`'s `extra` arguments (`--chaos` for schedules).
async fn stack_with(extra: &[&str]) -> Option<Stack> {
    mutated(extra, None).await
}

/// [`stack_with`], its instances running the live mutant `mutant`.
async fn mutated(extra: &[&str], mutant: Option<&str>) -> Option<Stack> {
    if !stocklock::up::postgres::installed() {
        crate::helpers::missing_tool("PostgreSQL is not installed (scripts/deps.sh postgresql)");
        return None;
    }
    let args: Vec<&str> = ["--orders", "on"].iter().chain(extra).copied().collect();
    Some(Stack::start_mutated(2, None, &args, mutant).await)
}

/// `stocklock reconcile --stock` of `sku`: its exit code and its one SKU.
async fn reconcile(stack: &Stack, sku: &str) -> (i32, Value) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_stocklock"))
        .args(["reconcile", "--stock", "--json", "--sku", sku])
        .args(["--redis-url", stack.redis_url.as_deref().unwrap()])
        .args(["--postgres-url", &stack.postgres.as_ref().unwrap().url])
        .output()
        .await
        .unwrap();
    let json: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|err| panic!("{err}: {}", String::from_utf8_lossy(&output.stderr)));
    (output.status.code().unwrap_or(-1), json[0].clone())
}

async fn get(stack: &Stack, url: &str) -> (u16, Value) {
    let response = stack.http().get(url).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// The URL of a `redis-then-pg` buyer of `sku` with request id `id`.
fn with_id(stack: &Stack, sku: &str, id: &str) -> String {
    format!(
        "{}/deductStock/redis-then-pg?sku={sku}&request_id={id}",
        stack.url
    )
}

/// A connection to the stack's PostgreSQL, to read the books that count.
async fn database(stack: &Stack) -> tokio_postgres::Client {
    stocklock::orders::connect(&stack.postgres.as_ref().unwrap().url)
        .await
        .unwrap()
}

/// The database's stock of `sku` now, recorded in `recorder`'s history as
/// a reading of the books that hold the truth.
async fn read_books(recorder: &Recorder, db: &tokio_postgres::Client, sku: &str) -> i64 {
    let call = recorder.now();
    let books = stocklock::pgstock::books(db, sku).await.unwrap().unwrap();
    recorder.read(sku, call, books.remaining);
    books.remaining
}

/// `recorder`'s history judged by `stocklock history check`: the one
/// SKU's verdict and why.
fn judged(recorder: &Recorder) -> (Verdict, String) {
    let histories = recorder.histories().unwrap();
    let report = stocklock::history::check(&histories, Duration::from_secs(30));
    assert_eq!(report.skus.len(), 1, "{report:?}");
    let decision = &report.skus[0];
    (decision.verdict, decision.why.clone())
}

/// Waits for the scheduled buyer of `scheduler`'s run to reach `after_read`
/// (in `redis-then-pg`: a unit taken in Redis, the database's stock read,
/// nothing written), letting it through the gates before; returns it held there.
async fn held_after_read(scheduler: &mut Scheduler) -> Arrival {
    loop {
        let at = scheduler
            .next(Duration::from_secs(10))
            .await
            .unwrap()
            .expect("the scheduled buyer arrived");
        if at.gate == "after_read" {
            return at;
        }
        scheduler.release(&at).await.unwrap();
    }
}

/// Lets the buyer held at `held` go, and through every gate after, until
/// `answered` (its request) ends; what it ends with.
async fn let_through<T>(
    scheduler: &mut Scheduler,
    held: &Arrival,
    mut answered: tokio::task::JoinHandle<T>,
) -> T {
    scheduler.release(held).await.unwrap();
    loop {
        tokio::select! {
            done = &mut answered => return done.unwrap(),
            at = scheduler.next(Duration::from_secs(10)) => {
                let at = at.unwrap().expect("the buyer arrived at a gate or answered");
                scheduler.release(&at).await.unwrap();
            }
        }
    }
}

/// One buyer of `sku` (stock 3) whose every write the database refuses
/// (a trigger skips the row's update, as a moved version would): it is
/// told `busy` (`version_conflict`). The two books after it.
async fn refused_once(stack: &Stack, sku: &str) -> (i32, Value) {
    stack.reset(sku, 3).await;
    let db = database(stack).await;
    db.batch_execute(&format!(
        "CREATE FUNCTION refuse_writes() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN RETURN NULL; END $$;
         CREATE TRIGGER refuse BEFORE UPDATE ON stock FOR EACH ROW
             WHEN (OLD.sku = '{sku}') EXECUTE FUNCTION refuse_writes();"
    ))
    .await
    .unwrap();
    let url = format!("{}/deductStock/redis-then-pg?sku={sku}", stack.url);
    let (status, refused) = get(stack, &url).await;
    db.batch_execute("DROP TRIGGER refuse ON stock; DROP FUNCTION refuse_writes()")
        .await
        .unwrap();
    assert_eq!(status, 429, "{refused}");
    assert_eq!(refused["reason"], "version_conflict", "{refused}");
    reconcile(stack, sku).await
}

/// Without the give-back (the live mutant `no-give-back`), the refused
/// buyer's unit stays taken in Redis: Redis is a unit short of the
/// database, which `reconcile` shows. No verdict rests on it: the
/// database answers the buyers Redis turns away, so the whole stock still
/// sells, the unit Redis kept among it, and the books meet once drained.
/// The give-back keeps Redis's filter true meanwhile.
#[tokio::test]
async fn without_the_give_back_redis_is_short_until_the_database_sells_its_unit() {
    within(Duration::from_secs(180), async {
        let Some(stack) = mutated(&[], Some("no-give-back")).await else {
            return;
        };
        let sku = "rtp-kept-unit";
        let (code, books) = refused_once(&stack, sku).await;
        assert_eq!(
            (
                &books["redis_remaining"],
                &books["redis_returned"],
                &books["pg_remaining"]
            ),
            (&Value::from(2), &Value::from(0), &Value::from(3)),
            "{books}"
        );
        assert_eq!((code, &books["agree"]), (2, &Value::Bool(false)), "{books}");
        let url = format!("{}/deductStock/redis-then-pg?sku={sku}", stack.url);
        let tally = burst(stack.http(), &url, 8, 4).await;
        let mut units = tally.units.clone();
        units.sort_unstable();
        assert_eq!(units, [1, 2, 3], "{tally:?}");
        let (code, books) = reconcile(&stack, sku).await;
        assert_eq!((code, &books["agree"]), (0, &Value::Bool(true)), "{books}");
        stack.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_refused_buyer_gives_its_unit_back_and_the_two_books_agree() {
    within(Duration::from_secs(180), async {
        let Some(stack) = stack().await else {
            return;
        };
        let sku = "rtp-refused";
        let (code, books) = refused_once(&stack, sku).await;
        assert_eq!(
            (
                &books["redis_sold"],
                &books["redis_returned"],
                &books["redis_remaining"]
            ),
            (&Value::from(1), &Value::from(1), &Value::from(3)),
            "the unit went back to Redis: {books}"
        );
        assert_eq!(books["pg_sold"], 0, "{books}");
        assert_eq!((code, &books["agree"]), (0, &Value::Bool(true)), "{books}");

        // The database takes writes again: the whole stock sells, the unit given back
        // among it, and the books still agree.
        let url = format!("{}/deductStock/redis-then-pg?sku={sku}", stack.url);
        let tally = burst(stack.http(), &url, 12, 4).await;
        let mut units = tally.units.clone();
        units.sort_unstable();
        let sold = units.len() as i64;
        assert_eq!(units, (4 - sold..=3).collect::<Vec<i64>>(), "{tally:?}");
        let (code, books) = reconcile(&stack, sku).await;
        assert_eq!((code, &books["agree"]), (0, &Value::Bool(true)), "{books}");
        assert_eq!(books["pg_sold"], sold, "{books}");
        let state = stack.state(sku).await;
        assert_eq!(
            (state.sold, state.oversold),
            (sold, 0),
            "the database's books"
        );
        stack.stop().await;
    })
    .await;
}

#[tokio::test]
async fn two_instances_race_and_reconcile_finds_the_books_agreeing() {
    within(Duration::from_secs(180), async {
        let Some(stack) = stack().await else {
            return;
        };
        let sku = "rtp-race";
        stack.reset(sku, 40).await;
        let url = format!(
            "{}/deductStock/redis-then-pg?sku={sku}&work_ms=2",
            stack.url
        );
        let tally = burst(stack.http(), &url, 300, 32).await;
        let mut units = tally.units.clone();
        units.sort_unstable();
        units.dedup();
        assert_eq!(
            units.len(),
            tally.units.len(),
            "a unit sold twice: {tally:?}"
        );
        assert_eq!(tally.by_instance.len(), 2, "both instances sold: {tally:?}");
        // Each refused write is another buyer's sale, and no more than 40
        // buyers get past Redis: none gives up, the whole stock sells.
        assert_eq!(tally.units.len(), 40, "{tally:?}");
        let (code, books) = reconcile(&stack, sku).await;
        assert_eq!((code, &books["agree"]), (0, &Value::Bool(true)), "{books}");
        assert_eq!(books["pg_sold"], tally.units.len(), "{books}");
        assert_eq!(books["pg_oversold"], 0, "{books}");
        stack.stop().await;
    })
    .await;
}
