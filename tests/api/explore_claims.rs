//! `stocklock explore` judges each cell's own claim, not safety alone: a
//! cell that claims its SKU frees itself, recovers, keeps selling or is
//! busy while the fault lasts fails a schedule after which it does not,
//! with the mechanism that makes it so taken out (a live mutant), and the
//! code as it is passes the same seeds. Retry-storm's own event, the
//! request id's claim running out under a live holder, is played, and
//! the claim's fence is what keeps the id to one sale.

use std::time::Duration;

use stocklock::variants::{Scenario, Variant};

use crate::explore::explore_cli;
use crate::helpers;

/// Each claim kind with the live mutant that takes its mechanism out:
/// a lock's lease (a dead holder's lock frees itself), the script given
/// again to a Redis that forgot it (sells again after the restart),
/// Redlock's refusal without a majority (busy while it is down). The
/// fourth kind, `keeps selling`, has its own test in `explore.rs`
/// (`redis-says-sold-out`: a buyer told sold out with the database's unit
/// left).
const CLAIMS: [(&str, Variant, Scenario, &str); 3] = [
    (
        "no-lease",
        Variant::Token,
        Scenario::CrashAfterAcquire,
        "frees",
    ),
    (
        "no-script-reload",
        Variant::Lua,
        Scenario::RedisRestart,
        "recovers",
    ),
    (
        "quorum-fallback",
        Variant::Redlock,
        Scenario::RedlockMajorityDown,
        "busy",
    ),
];
const WITHIN: usize = 60;

/// A claim broken shows in the schedule's verdict (its ledger line names
/// the claim); the history checker, which judges safety and what buyers
/// were told, has nothing against it: only the claim's judge sees it.
#[tokio::test]
async fn each_claim_kind_fails_with_its_mechanism_taken_out_and_holds_with_it() {
    helpers::within(Duration::from_secs(900), async {
        for (mutant, variant, scenario, kind) in CLAIMS {
            let cell = (variant, scenario, "pct");
            let (code, mutated) = explore_cli(cell, WITHIN, Some(mutant)).await;
            let found = &mutated["found"];
            let ledger = found["ledger"].as_str().unwrap_or_default();
            assert!(
                code == 2 && ledger.contains(&format!("claim {kind}: ")),
                "{mutant} ({variant} in {scenario}): not found in {WITHIN} schedules (exit {code}): {mutated}"
            );
            assert!(
                found["history"].as_str().unwrap().starts_with("linearizable"),
                "{mutant}: {found}"
            );
            let until = mutated["until_found"].as_u64().unwrap() as usize;
            eprintln!("{mutant} ({variant} in {scenario}): found in {until} schedules: {ledger}");
            let (code, clean) = explore_cli(cell, until.max(10), None).await;
            assert!(
                code == 0 && clean["found"].is_null() && clean["disagreed"].is_null(),
                "{variant} in {scenario} without {mutant} broke its claim: {clean}"
            );
        }
    })
    .await;
}

/// Retry-storm: the explorer lets the request id's claim run out under
/// the attempt at work (`ClaimRunsOut`), and the buyers told "in progress"
/// ask again, one taking the claim over. With the claim no fence (the live
/// mutant `no-claim-fence`: the write takes the claim back whatever stands
/// there), the id sells twice, and the history checker convicts it from
/// the answers alone; the code as it is passes the same seeds, the claim
/// running out in some of them.
#[tokio::test]
async fn a_claim_that_runs_out_under_its_holder_is_a_fence_for_the_retry_that_takes_it() {
    helpers::within(Duration::from_secs(600), async {
        let cell = (Variant::Token, Scenario::RetryStorm, "pct");
        let (code, mutated) = explore_cli(cell, WITHIN, Some("no-claim-fence")).await;
        let found = &mutated["found"];
        assert!(
            code == 2
                && found["ledger"]
                    .as_str()
                    .is_some_and(|l| l.contains("one request id sold 2 times")),
            "exit {code}: {mutated}"
        );
        let steps = found["steps"].to_string();
        assert!(steps.contains("ClaimRunsOut"), "{steps}");
        assert!(
            found["history"].as_str().unwrap().starts_with("unsafe"),
            "{found}"
        );
        let until = mutated["until_found"].as_u64().unwrap() as usize;
        let (code, clean) = explore_cli(cell, until.max(20), None).await;
        assert!(
            code == 0 && clean["found"].is_null() && clean["disagreed"].is_null(),
            "exit {code}: {clean}"
        );
        assert!(
            clean["struck"]["ClaimRunsOut"].as_u64().unwrap_or(0) > 0,
            "{clean}"
        );
    })
    .await;
}
