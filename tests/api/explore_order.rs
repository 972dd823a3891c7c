//! A schedule is its seed's, whatever the machine's load: what buyers do
//! before their first gate is done in an order the seed chooses, and a
//! buyer on its way is waited for until it arrives or is known to wait.

use std::time::Duration;

use stocklock::explore::{self, Session, Setup};
use stocklock::variants::{Scenario, Variant};

use crate::helpers::{self, Stack};

/// Retry-storm's three buyers send one request id: the first to claim it
/// goes on to its gate, the two after it are told "in progress". Which
/// one is first is the seed's choice (seed `s`: buyer `s mod 3`), never
/// whichever request reached Redis first (on main, buyer A nearly always,
/// and another on a loaded machine).
#[tokio::test]
async fn the_buyer_that_claims_a_retried_id_first_is_the_seeds_choice() {
    helpers::within(Duration::from_secs(120), async {
        let stack = Stack::start_with(2, None, &["--chaos"]).await;
        let redis_url = stack.redis_url.clone().expect("up started its Redis");
        let redises = explore::Redises::one(&redis_url);
        let cell = (Variant::Token, Scenario::RetryStorm);
        for seed in 0..6u64 {
            let setup = Setup::explore(cell.0, cell.1, seed);
            let mut session = Session::start(&stack, &redises, cell, setup, seed)
                .await
                .unwrap();
            let lanes = session.lanes();
            let first = ["A", "B", "C"][(seed % 3) as usize];
            for lane in &lanes {
                match lane.buyer == first {
                    true => assert_eq!(
                        (lane.state.as_str(), lane.gate.as_deref()),
                        ("waiting", Some("before_acquire")),
                        "seed {seed}: {lanes:?}"
                    ),
                    false => assert_eq!(
                        (lane.state.as_str(), lane.reason.as_deref()),
                        ("answered", Some("in_progress")),
                        "seed {seed}: {lanes:?}"
                    ),
                }
            }
            // The schedule played to its end: the first buyer's sale.
            while let Some(options) = session.next().await.unwrap() {
                let release = options.releases.first().expect("a buyer waits");
                session.take(release.clone()).await.unwrap();
            }
            let lanes = session.lanes();
            let sold = lanes.iter().filter(|l| l.status == Some(200));
            assert_eq!(sold.count(), 1, "seed {seed}: {lanes:?}");
        }
        stack.stop().await;
    })
    .await;
}
