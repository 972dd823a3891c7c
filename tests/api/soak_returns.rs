//! `stocklock soak` and the order variants' reservations that expire: a
//! unit given back is in the round's history, and a unit sold again after
//! it came back is sold once each time, for both judges.

use std::time::{Duration, Instant};

use stocklock::history::Recorder;
use stocklock::soak::buyers::{self, Ending, Got, Round};
use stocklock::soak::{judge, second};
use stocklock::variants::Variant;

use crate::helpers::{Stack, within};
use crate::soak::{one_attempt, soak};

/// A unit given back (its reservation expired) may be sold again within
/// the round: the soak's judge counts that as two sales, not a unit sold
/// twice, and the history, the return recorded in it, fits one stock. A
/// 2-minute soak with `--pay-within 5s` found the judge calling it a unit
/// sold twice (rounds that outlived their reservations under faults) while
/// the history checker found every answer its place.
#[tokio::test]
async fn a_unit_given_back_and_sold_again_is_sold_once_each_time() {
    if !stocklock::up::postgres::installed() {
        crate::helpers::missing_tool("PostgreSQL is not installed (scripts/deps.sh postgresql)");
        return;
    }
    let stack = Stack::start_with(2, None, &["--orders", "on", "--pay-within", "1s"]).await;
    within(Duration::from_secs(120), async {
        let variant = Variant::LuaStream;
        let sku = "given-back".to_owned();
        let recorder = Recorder::prefixed("lua-stream/");
        let recording = stack.client.recording(recorder.clone());
        recording.reset(&sku, 1, 0).await.unwrap();
        let started = Instant::now();
        let buy = |n: u32| {
            let id = format!("{sku}-{n}");
            let path = buyers::path(variant, &sku, &id);
            let client = recording.clone();
            async move { one_attempt(&client, &path, id, started).await }
        };
        let a = buy(1).await;
        assert_eq!(a.settled(), Got::Sold(1));
        // The reservation expires a second after its order is written;
        // the instances' expiry pass gives the unit back (nothing to wait
        // on but the books).
        while stack.state(&sku).await.returned < 1 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let b = buy(2).await;
        assert_eq!(b.settled(), Got::Sold(1));
        let round = Round {
            variant,
            sku: sku.clone(),
            from_ms: 0,
            to_ms: started.elapsed().as_millis() as u64,
            ending: Ending::SoldOut,
            requests: vec![a, b],
            recorder,
            clock_ns: 0,
        };
        let store = stocklock::store::Store::open(stack.redis_url.as_deref().unwrap()).unwrap();
        let postgres = stack.postgres.as_ref().map(|p| p.url.clone());
        let books = stocklock::soak::books::Books::new(postgres, store, true);
        let returns = stocklock::soak::returns::Returns {
            books: &books,
            pay_within: Duration::from_secs(1),
        };
        let (broken, counted) =
            judge::round(&stack.client, &round, &[], true, 1, Some(&returns)).await;
        assert_eq!(broken, Vec::<String>::new());
        assert_eq!(counted.unsafe_seen, None);
        // The return is timed by the database's expiry and give-back,
        // between the two sales: well inside the round.
        let text = round.recorder.text();
        let back = text
            .lines()
            .find(|l| l.contains(r#""outcome":"returned""#))
            .unwrap_or_else(|| panic!("no return in {text}"));
        let op: serde_json::Value = serde_json::from_str(back).unwrap();
        let (call, ret) = (op["call"].as_u64().unwrap(), op["ret"].as_u64().unwrap());
        assert!(ret >= call && ret - call < 500_000_000, "{back}");
        let checked = second::judge(&round.recorder, 2, &counted).await;
        assert_eq!(checked.verdict, "linearizable", "{checked:?}");
        assert_eq!(checked.disagreement, None, "{checked:?}");
        // Blind to the units given back, the same round sold unit 1 twice.
        let (broken, _) = judge::round(&stack.client, &round, &[], true, 1, None).await;
        assert!(
            broken.iter().any(|b| b.contains("unit 1 was sold to")),
            "{broken:?}"
        );
    })
    .await;
    stack.stop().await;
}

/// Reservations not paid in time expire and give their units back (the
/// stack's `--pay-within`): a round judged after that reads its books full
/// again. The 30-minute soak met it (pay within 15 min, its judge behind
/// by 16): 1 202 rounds of `lua-stream` and `lua-then-queue` whose buyers
/// were told "sold unit 39" and whose books then read "40 left", which no
/// stock fits. The history records each unit given back, so the history
/// checker and the soak's judge agree. (No fault strikes these variants:
/// `lock-vanishes` finds no lock to delete.)
#[tokio::test]
async fn a_round_judged_after_its_reservations_expired_counts_their_units_back() {
    let args = [
        "--minutes",
        "0.25",
        "--seed",
        "1",
        "--variant",
        "lua-stream,lua-then-queue",
        "--faults",
        "lock-vanishes",
        "--pay-within",
        "1s",
    ];
    let (run, _, report, history) = soak(&args, 300).await;
    assert!(
        report.faults.iter().all(|f| !f.error.is_empty()),
        "a fault struck: {:?}",
        report.faults
    );
    assert_eq!(report.violations, vec![], "violations");
    assert!(run.status.success(), "exit {:?}", run.status);
    // Units came back in every round, and each round's books read shows them.
    let histories = stocklock::history::op::parse(&history).unwrap();
    let rounds: u64 = report.variants.iter().map(|v| v.rounds).sum();
    assert!(rounds >= 4, "{:?}", report.variants);
    assert_eq!(histories.len() as u64, rounds);
    let returned = history.matches(r#""outcome":"returned""#).count() as u64;
    assert!(
        returned >= rounds,
        "{returned} units back in {rounds} rounds"
    );
    for v in &report.variants {
        assert_eq!(v.history.get("linearizable"), Some(&v.rounds), "{v:?}");
    }
    // The rounds judged while the load went on waited the grace first.
    assert!(
        report.judged_late_s >= stocklock::soak::faults::GRACE_S,
        "{}",
        report.judged_late_s
    );
}
