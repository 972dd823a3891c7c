//! Request ids: the database keeps them. An id it answered is answered from
//! there without a unit taken in Redis; an id is told sold out only when
//! the database has none left, and recorded so; every attempt of an id is
//! told its one answer, whatever the stock is by then.

use std::time::Duration;

use serde_json::Value;
use stocklock::gate::Scheduler;
use stocklock::knobs::Sku;
use stocklock::orders::expiry::GiveBack;
use stocklock::store::Keys;

use super::{get, held_after_read, let_through, reconcile, stack, stack_with, with_id};
use crate::helpers::{Stack, within};

/// Gives sale `sale`'s unit `unit` of `sku` back to Redis (`give_back.lua`,
/// as a buyer the database refused does): here, a unit the database sold,
/// which leaves Redis a unit the database does not have.
async fn give_back_in_redis(stack: &Stack, sku: &str, sale: i64, unit: i64) {
    let store = stocklock::store::Store::open(stack.redis_url.as_deref().unwrap()).unwrap();
    let mut conn = store.conn().await.unwrap();
    let keys = Keys::new(&Sku::parse(sku).unwrap());
    let epoch = crate::helpers::epoch(&mut conn, &keys).await;
    let given = stocklock::orders::expiry::give_back(&mut conn, &keys, epoch, sale, unit)
        .await
        .unwrap();
    assert_eq!(given, GiveBack::Returned);
}

#[tokio::test]
async fn an_id_the_database_answered_is_replayed_without_taking_a_unit_in_redis() {
    within(Duration::from_secs(180), async {
        let Some(stack) = stack().await else {
            return;
        };
        let sku = "rtp-ids";
        stack.reset(sku, 2).await;
        let with_id = |id: &str| {
            format!(
                "{}/deductStock/redis-then-pg?sku={sku}&request_id={id}",
                stack.url
            )
        };
        let (_, first) = get(&stack, &with_id("a")).await;
        assert_eq!(first["outcome"], "sold", "{first}");
        let (_, second) = get(&stack, &with_id("b")).await;
        assert_eq!(second["outcome"], "sold", "{second}");
        // Redis is sold out now; a's retry is told its sale all the same,
        // from the database, and Redis is not asked.
        for _ in 0..3 {
            let (status, again) = get(&stack, &with_id("a")).await;
            assert_eq!(status, 200, "{again}");
            assert_eq!(
                (&again["unit"], &again["replayed"]),
                (&first["unit"], &Value::Bool(true))
            );
        }
        let (status, late) = get(&stack, &with_id("c")).await;
        assert_eq!(
            (status, &late["outcome"]),
            (409, &Value::from("sold_out")),
            "{late}"
        );
        let (code, books) = reconcile(&stack, sku).await;
        assert_eq!(
            (&books["redis_sold"], &books["pg_sold"]),
            (&Value::from(2), &Value::from(2)),
            "{books}"
        );
        assert_eq!(code, 0, "{books}");
        stack.stop().await;
    })
    .await;
}

#[tokio::test]
async fn the_retry_of_the_id_that_bought_the_last_unit_is_told_its_sale() {
    within(Duration::from_secs(180), async {
        let Some(stack) = stack().await else {
            return;
        };
        let sku = "rtp-last";
        stack.reset(sku, 1).await;
        let (status, first) = get(&stack, &with_id(&stack, sku, "r1")).await;
        assert_eq!((status, &first["outcome"]), (200, &Value::from("sold")));
        // Redis is sold out now; r1's retries are told its sale, the same unit.
        for _ in 0..3 {
            let (status, again) = get(&stack, &with_id(&stack, sku, "r1")).await;
            assert_eq!(status, 200, "r1's retry after its sale: {again}");
            assert_eq!(
                (&again["outcome"], &again["unit"], &again["replayed"]),
                (&first["outcome"], &first["unit"], &Value::Bool(true)),
                "{again}"
            );
        }
        let state = stack.state(sku).await;
        assert_eq!((state.sold, state.oversold), (1, 0), "{state:?}");
        stack.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_retry_racing_its_first_attempt_is_told_the_same_answer() {
    within(Duration::from_secs(180), async {
        let Some(stack) = stack_with(&["--chaos"]).await else {
            return;
        };
        let sku = "rtp-racing-retry";
        stack.reset(sku, 1).await;
        let run = "rtp-racing-retry";
        let mut scheduler = Scheduler::start(stack.redis_url.as_deref().unwrap(), run)
            .await
            .unwrap();
        // r1's first attempt (A) takes the last unit in Redis and is held
        // in the database's section, having read the stock, before its write.
        let url = format!("{}&schedule={run}:A", with_id(&stack, sku, "r1"));
        let http = stack.http().clone();
        let mut first = tokio::spawn(async move {
            let response = http.get(&url).send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        });
        let arrival = Duration::from_secs(10);
        let held = loop {
            let at = scheduler.next(arrival).await.unwrap().expect("A arrived");
            if at.gate == "after_read" {
                break at;
            }
            scheduler.release(&at).await.unwrap();
        };
        // r1's retry (no schedule) while A is held: Redis is sold out.
        let (retry_status, retry) = get(&stack, &with_id(&stack, sku, "r1")).await;
        // A goes on to its answer through whatever gates are left.
        scheduler.release(&held).await.unwrap();
        let (first_status, first) = loop {
            tokio::select! {
                done = &mut first => break done.unwrap(),
                at = scheduler.next(arrival) => {
                    let at = at.unwrap().expect("A arrived or answered");
                    scheduler.release(&at).await.unwrap();
                }
            }
        };
        // One id, one outcome: the two attempts agree, and so does a third.
        let (again_status, again) = get(&stack, &with_id(&stack, sku, "r1")).await;
        let told =
            |status: u16, body: &Value| (status, body["outcome"].clone(), body["unit"].clone());
        assert_eq!(
            told(retry_status, &retry),
            told(first_status, &first),
            "r1 was told two outcomes: the retry {retry}, the first attempt {first}"
        );
        assert_eq!(
            told(again_status, &again),
            told(first_status, &first),
            "{again}"
        );
        let replayed = [&first, &retry, &again].map(|a| a["replayed"] == Value::Bool(true));
        assert_eq!(replayed.iter().filter(|r| !**r).count(), 1, "{replayed:?}");
        // The database sold the unit to r1 at most once. (Redis's books are
        // not compared: the retry, turned away by Redis, buys the unit in
        // the database while A is held, and A, told r1's sale, gives its
        // unit back: Redis has a unit the database does not, until the next
        // buyer takes it and is told sold out.)
        let sold = i64::from(first_status == 200);
        let (_, books) = reconcile(&stack, sku).await;
        assert_eq!(
            (&books["pg_sold"], &books["pg_oversold"]),
            (&Value::from(sold), &Value::from(0)),
            "{books}"
        );
        stack.stop().await;
    })
    .await;
}

/// An id is told "sold out" only by a database that has none left, and
/// the answer is recorded: when Redis later holds a unit the database does
/// not have (a unit given back after a buyer Redis turned away bought it),
/// the id's retry is told its sold-out again from the record, Redis not
/// asked, and the unit is another buyer's to take, whom the database tells
/// sold out.
#[tokio::test]
async fn an_id_told_sold_out_stays_sold_out_when_redis_gets_a_unit_back() {
    within(Duration::from_secs(180), async {
        let Some(stack) = stack().await else {
            return;
        };
        let sku = "rtp-told-sold-out";
        stack.reset(sku, 1).await;
        // `lua` takes Redis's one unit: the database still has it.
        let (status, _) = get(&stack, &format!("{}/deductStock/lua?sku={sku}", stack.url)).await;
        assert_eq!(status, 200);
        // r2 is turned away by Redis; the database has the unit, and sells it.
        let (status, bought) = get(&stack, &with_id(&stack, sku, "r2")).await;
        assert_eq!(
            (status, &bought["unit"], bought["replayed"] == true),
            (200, &Value::from(1), false),
            "Redis was short, the database was not: {bought}"
        );
        // r3 is turned away by both: sold out, recorded.
        let (status, first) = get(&stack, &with_id(&stack, sku, "r3")).await;
        assert_eq!(
            (status, &first["outcome"], first["replayed"] == true),
            (409, &Value::from("sold_out"), false),
            "{first}"
        );
        // Redis gets `lua`'s unit back (sale 1): a unit the database does not have.
        give_back_in_redis(&stack, sku, 1, 1).await;
        // r3's retry is told sold out again, from its record: Redis keeps its unit.
        let (status, again) = get(&stack, &with_id(&stack, sku, "r3")).await;
        assert_eq!(
            (status, &again["outcome"], &again["replayed"]),
            (409, &Value::from("sold_out"), &Value::Bool(true)),
            "r3's retry after its sold-out: {again}"
        );
        let (_, books) = reconcile(&stack, sku).await;
        assert_eq!(books["redis_remaining"], 1, "Redis was not asked: {books}");
        // r2's retry is told its sale.
        let (status, again) = get(&stack, &with_id(&stack, sku, "r2")).await;
        assert_eq!(
            (status, &again["unit"], &again["replayed"]),
            (200, &Value::from(1), &Value::Bool(true)),
            "{again}"
        );
        // r4 takes Redis's unit; the database has none: sold out, and Redis
        // keeps the unit taken, so the books meet again.
        let (status, other) = get(&stack, &with_id(&stack, sku, "r4")).await;
        assert_eq!(
            (status, &other["outcome"]),
            (409, &Value::from("sold_out")),
            "{other}"
        );
        let (code, books) = reconcile(&stack, sku).await;
        assert_eq!((code, &books["agree"]), (0, &Value::Bool(true)), "{books}");
        assert_eq!(books["pg_sold"], 1, "{books}");
        stack.stop().await;
    })
    .await;
}

/// A sold-out is recorded for an id only while the database has none left:
/// a buyer that read the stock empty and is then overtaken by a reset
/// (held between its read and its record) records nothing and is told
/// `busy` (`reset`), so that its retry buys from the new stock rather than
/// be told a sold-out that is false of it.
#[tokio::test]
async fn a_sold_out_read_before_a_reset_is_not_recorded_for_the_new_stock() {
    within(Duration::from_secs(180), async {
        let Some(stack) = stack_with(&["--chaos"]).await else {
            return;
        };
        let sku = "rtp-reset-race";
        stack.reset(sku, 1).await;
        let (status, _) = get(&stack, &with_id(&stack, sku, "r1")).await;
        assert_eq!(status, 200);
        // Redis gets r1's unit back (sale 1): a unit the database does not
        // have, which the next buyer takes before reading an empty stock.
        give_back_in_redis(&stack, sku, 1, 1).await;
        let run = "rtp-reset-race";
        let mut scheduler = Scheduler::start(stack.redis_url.as_deref().unwrap(), run)
            .await
            .unwrap();
        let client = stack.client.clone();
        let path = format!("/deductStock/redis-then-pg?sku={sku}&request_id=r5&schedule={run}:A");
        let first = tokio::spawn(async move { client.get(&path).await });
        // r5 took Redis's unit and read the database's stock: none left.
        let held = held_after_read(&mut scheduler).await;
        stack.reset(sku, 2).await;
        let (status, first) = let_through(&mut scheduler, &held, first).await;
        assert_eq!(
            (status, &first["reason"]),
            (429, &Value::from("reset")),
            "r5 read the old stock empty, and the new one has 2: {first}"
        );
        let (status, retry) = get(&stack, &with_id(&stack, sku, "r5")).await;
        assert_eq!(
            (status, &retry["unit"]),
            (200, &Value::from(2)),
            "r5's retry buys from the new stock: {retry}"
        );
        let state = stack.state(sku).await;
        assert_eq!((state.sold, state.remaining), (1, 1), "{state:?}");
        stack.stop().await;
    })
    .await;
}

/// Stock 1: r1's first attempt (A) holds Redis's unit between its read and
/// its write; a buyer Redis turns away meanwhile buys the database's unit,
/// and r1's retry, turned away by both, is told sold out (recorded). A
/// then finds none left and its id told sold out: it is told the same and
/// keeps its Redis unit taken (the database has none for it), so the two
/// books agree.
#[tokio::test]
async fn an_attempt_whose_id_was_told_sold_out_meanwhile_keeps_its_unit_taken() {
    within(Duration::from_secs(180), async {
        let Some(stack) = stack_with(&["--chaos"]).await else {
            return;
        };
        let sku = "rtp-kept";
        stack.reset(sku, 1).await;
        let run = "rtp-kept";
        let mut scheduler = Scheduler::start(stack.redis_url.as_deref().unwrap(), run)
            .await
            .unwrap();
        let client = stack.client.clone();
        let path = format!("/deductStock/redis-then-pg?sku={sku}&request_id=r1&schedule={run}:A");
        let first = tokio::spawn(async move { client.get(&path).await });
        let held = held_after_read(&mut scheduler).await;
        let url = format!("{}/deductStock/redis-then-pg?sku={sku}", stack.url);
        let (status, other) = get(&stack, &url).await;
        assert_eq!(
            status, 200,
            "Redis turned it away, the database sold: {other}"
        );
        let (status, retry) = get(&stack, &with_id(&stack, sku, "r1")).await;
        assert_eq!(
            (status, &retry["outcome"]),
            (409, &Value::from("sold_out")),
            "{retry}"
        );
        let (status, first) = let_through(&mut scheduler, &held, first).await;
        assert_eq!(
            (status, &first["outcome"], &first["replayed"]),
            (409, &Value::from("sold_out"), &Value::Bool(true)),
            "r1 has one answer: {first}"
        );
        let (code, books) = reconcile(&stack, sku).await;
        assert_eq!((code, &books["agree"]), (0, &Value::Bool(true)), "{books}");
        assert_eq!(
            (&books["redis_returned"], &books["pg_sold"]),
            (&Value::from(0), &Value::from(1)),
            "{books}"
        );
        stack.stop().await;
    })
    .await;
}
