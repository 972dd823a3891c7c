//! `stocklock replay`: every counterexample of the checker that the gates
//! can stand for, driven step for step through the real code on a live
//! stack, breaks live what it breaks in the model.

use std::time::Duration;

use stocklock::check;
use stocklock::lab::replay;

use crate::helpers::{self, Stack};

/// The counterexample cells replays cannot play yet, and why (the docs
/// name them too: docs/schedules.md).
const NOT_YET: [(&str, &str, &str); 12] = [
    ("setnx-expiry", "clock-skew", "a skewed clock"),
    ("token", "failover", "HoldReplication"),
    ("token", "failover-wait", "waiting for its WAIT"),
    ("watchdog", "pause-holder", "a watchdog's renewals"),
    ("watchdog", "lock-vanishes", "a watchdog's renewals"),
    ("watchdog", "failover", "a watchdog's renewals"),
    ("fenced", "failover", "a watchdog's renewals"),
    ("redlock", "pause-holder", "a watchdog's renewals"),
    (
        "redlock",
        "redlock-restart-without-persistence",
        "a watchdog's renewals",
    ),
    (
        "lua-then-queue",
        "crash-before-enqueue",
        "every sale reaches its order",
    ),
    (
        "lua-then-queue",
        "redis-data-loss",
        "every sale reaches its order",
    ),
    (
        "lua-stream",
        "redis-data-loss",
        "every sale reaches its order",
    ),
];

#[tokio::test]
async fn every_counterexample_the_gates_reach_breaks_live_as_in_the_model() {
    helpers::within(Duration::from_secs(600), async {
        let stack = Stack::start_with(3, None, &["--chaos"]).await;
        let redis_url = stack.redis_url.clone().expect("up started its Redis");
        let mut not_yet = Vec::new();
        let mut played = 0;
        for (variant, scenario) in check::cells() {
            let verdict = check::check(variant, scenario).expect("a modelled cell");
            if verdict.broken.is_none() {
                continue;
            }
            if let Some(why) = replay::unsupported(&verdict) {
                not_yet.push((verdict.variant, verdict.scenario, why));
                continue;
            }
            let replay = replay::replay_on(&stack, &redis_url, &verdict, 300)
                .await
                .unwrap_or_else(|err| panic!("{variant} in {scenario}: {err:#}"));
            assert!(
                replay.agrees,
                "{variant} in {scenario}: the model breaks \"{}\", live: {}\n{:#?}",
                replay.property, replay.live, replay.steps
            );
            played += 1;
        }
        eprintln!(
            "replayed {played} counterexamples live; {} not yet",
            not_yet.len()
        );
        let named: Vec<(&str, &str)> = NOT_YET.iter().map(|(v, s, _)| (*v, *s)).collect();
        let found: Vec<(&str, &str)> = not_yet.iter().map(|(v, s, _)| (*v, *s)).collect();
        assert_eq!(found, named, "the cells replays cannot play: {not_yet:#?}");
        for ((_, _, why), (variant, scenario, named)) in not_yet.iter().zip(NOT_YET) {
            assert!(why.contains(named), "{variant} in {scenario}: {why}");
        }
        assert_eq!(played, 18, "replayed");
        stack.stop().await;
    })
    .await;
}
