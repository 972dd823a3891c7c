//! The order pipeline's gates that meet an order rather than a request:
//! the worker between a scheduled buyer's commit and its ack (see
//! `replay.rs`), and the expiry pass, which holds a scheduled buyer's
//! cancelled reservation before its unit goes back.

use std::time::{Duration, Instant};

use stocklock::gate::{Arrival, Scheduler};

use crate::helpers::{self, Stack};

/// How long the test waits for an arrival before it calls the run broken.
const ARRIVAL: Duration = Duration::from_secs(15);

/// The next arrival of `scheduler`'s run, which must come.
async fn next(scheduler: &mut Scheduler) -> Arrival {
    scheduler
        .next(ARRIVAL)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("nothing arrived within {ARRIVAL:?}"))
}

/// A scheduled buyer's reservation (pay within 1 s) is not paid: the
/// instance's expiry pass cancels it and stops at `before_give_back`,
/// the unit still sold; let go, the unit is back in stock.
#[tokio::test]
async fn the_expiry_pass_stops_before_giving_a_scheduled_buyers_unit_back() {
    helpers::within(Duration::from_secs(120), async {
        let args = [
            "--chaos",
            "--orders",
            "on",
            "--pay-within",
            "1s",
            "--redlock",
            "0",
        ];
        let stack = Stack::start_with(1, None, &args).await;
        let redis_url = stack.redis_url.clone().expect("up started its Redis");
        let sku = "expiry-gate";
        stack.client.reset(sku, 5, 0).await.unwrap();
        let mut scheduler = Scheduler::start(&redis_url, "expiry-gate").await.unwrap();
        let path =
            format!("/deductStock/lua-then-queue?sku={sku}&request_id=r-1&schedule=expiry-gate:A");
        let client = stack.client.clone();
        let request = tokio::spawn(async move { client.deduct(&path).await });
        let mut gates = Vec::new();
        let held = loop {
            let arrival = next(&mut scheduler).await;
            // The worker stops at the buyer's gate under a name of its own.
            let buyer = match arrival.gate.as_str() {
                "worker_committed" => format!("A@{}", stack.instances[0].name),
                _ => "A".to_owned(),
            };
            assert_eq!(arrival.buyer, buyer, "{arrival:?}");
            if arrival.gate == "before_give_back" {
                break arrival;
            }
            gates.push(arrival.gate.clone());
            scheduler.release(&arrival).await.unwrap();
        };
        // The answer and the worker's commit race each other: in either order.
        assert_eq!(gates[..2], ["before_acquire", "before_enqueue"]);
        gates[2..].sort();
        assert_eq!(gates[2..], ["after_release", "worker_committed"]);
        let answer = request.await.unwrap();
        let token = answer.order_token().expect("an order token");
        let order = stack.client.find_order(sku, "r-1", token).await.unwrap();
        let order = order.expect("the order");
        assert_eq!(order.status, "expired", "cancelled before the gate");
        let state = stack.client.state(sku).await.unwrap();
        assert_eq!(state.remaining, 4, "the unit is not back while held");
        scheduler.release(&held).await.unwrap();
        let back_by = Instant::now() + Duration::from_secs(10);
        while stack.client.state(sku).await.unwrap().remaining != 5 {
            assert!(Instant::now() < back_by, "the unit never came back");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stack.stop().await;
    })
    .await;
}
