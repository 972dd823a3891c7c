//! `redis-then-pg` on a stack with PostgreSQL: Redis takes a unit first and
//! the database decides; a refusal gives the unit back, so `stocklock
//! reconcile --stock` finds the two books agreeing; an id answered by the
//! database is answered from there without a unit taken in Redis.

use std::time::Duration;

use serde_json::Value;

use crate::helpers::{Stack, burst, within};

/// A stack of two instances with PostgreSQL, or `None` when PostgreSQL is
/// missing (which fails under CI).
async fn stack() -> Option<Stack> {
    if !stocklock::up::postgres::installed() {
        crate::helpers::missing_tool("PostgreSQL is not installed (scripts/deps.sh postgresql)");
        return None;
    }
    Some(Stack::start_with(2, None, &["--orders", "on"]).await)
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

#[tokio::test]
async fn a_refused_buyer_gives_its_unit_back_and_the_two_books_agree() {
    within(Duration::from_secs(180), async {
        let Some(stack) = stack().await else {
            return;
        };
        let sku = "rtp-refused";
        stack.reset(sku, 3).await;
        // The database refuses every write of the SKU's row (a trigger skips
        // it, as a moved version would): every one of the buyer's tries fails.
        let db = stocklock::orders::connect(&stack.postgres.as_ref().unwrap().url)
            .await
            .unwrap();
        db.batch_execute(&format!(
            "CREATE FUNCTION refuse_writes() RETURNS trigger LANGUAGE plpgsql AS
                 $$ BEGIN RETURN NULL; END $$;
             CREATE TRIGGER refuse BEFORE UPDATE ON stock FOR EACH ROW
                 WHEN (OLD.sku = '{sku}') EXECUTE FUNCTION refuse_writes();"
        ))
        .await
        .unwrap();
        let url = format!("{}/deductStock/redis-then-pg?sku={sku}", stack.url);
        let (status, refused) = get(&stack, &url).await;
        db.batch_execute("DROP TRIGGER refuse ON stock")
            .await
            .unwrap();
        assert_eq!(status, 429, "{refused}");
        assert_eq!(refused["reason"], "version_conflict", "{refused}");
        let (code, books) = reconcile(&stack, sku).await;
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

#[tokio::test]
async fn units_lost_between_redis_and_the_database_come_back_once_the_database_is_quiet() {
    within(Duration::from_secs(180), async {
        let Some(stack) = stack().await else {
            return;
        };
        let sku = "rtp-lost";
        stack.reset(sku, 2).await;
        // A unit taken in Redis that never reaches the database: what a Redis
        // answer lost after its script ran, or an instance killed between the
        // two, leaves. `lua` on the same SKU takes one exactly so.
        let (status, _) = get(&stack, &format!("{}/deductStock/lua?sku={sku}", stack.url)).await;
        assert_eq!(status, 200);
        let url = format!("{}/deductStock/redis-then-pg?sku={sku}", stack.url);
        let (status, first) = get(&stack, &url).await;
        assert_eq!(status, 200, "{first}");
        // Redis is sold out, the database has one left: the books disagree.
        let (code, books) = reconcile(&stack, sku).await;
        assert_eq!(
            (&books["redis_remaining"], &books["pg_remaining"]),
            (&Value::from(0), &Value::from(1)),
            "{books}"
        );
        assert_ne!(code, 0, "reconcile says the books disagree: {books}");
        // Buyers are turned away by Redis until the database has been quiet
        // for a second; then Redis catches up and the last unit sells.
        // Asked every 100 ms, at most 10 s.
        let mut sold = None;
        for _ in 0..100 {
            let (status, answer) = get(&stack, &url).await;
            if status == 200 {
                sold = Some(answer);
                break;
            }
            assert_eq!(status, 409, "{answer}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let sold = sold.expect("the lost unit never came back");
        assert_eq!(sold["remaining"], 0, "{sold}");
        let (code, books) = reconcile(&stack, sku).await;
        assert_eq!((code, &books["agree"]), (0, &Value::Bool(true)), "{books}");
        assert_eq!(
            (&books["redis_returned"], &books["pg_sold"]),
            (&Value::from(1), &Value::from(2)),
            "{books}"
        );
        stack.stop().await;
    })
    .await;
}
