//! Tests that each mechanism the checker credits matters: taken out of the
//! model (a [`Mutation`]), a named cell's verdict flips.

use super::model::Mutation;
use super::*;

fn verdict(variant: Variant, scenario: Scenario) -> Verdict {
    check(variant, scenario).expect("a modelled cell")
}

/// Each mechanism the checker credits is shown to matter: taken out of
/// the model, a named cell's verdict flips from its claim to what that
/// mechanism prevents (or to `vacuous`, where it is what lets anyone sell).
#[test]
fn each_mechanism_taken_out_flips_a_named_cell() {
    let none = Mutation::default();
    let cases = [
        // A frozen holder's late write, refused only by the fence.
        (
            Variant::Fenced,
            Scenario::PauseHolder,
            Mutation {
                no_fence_check: true,
                ..none
            },
            "oversells",
        ),
        (
            Variant::Etcd,
            Scenario::PauseHolder,
            Mutation {
                no_fence_check: true,
                ..none
            },
            "oversells",
        ),
        // A release that deletes whoever's lock it finds frees the next
        // holder's: a third buyer joins it. (Under a watchdog the third
        // buyer's renewal notices before its write, so only a lock with no
        // renewal shows it.)
        (
            Variant::Token,
            Scenario::RedisRestart,
            Mutation {
                plain_del_release: true,
                ..none
            },
            "oversells",
        ),
        // With no renewal, slow business is past its local deadline every
        // time: nobody ever sells.
        (
            Variant::Watchdog,
            Scenario::SlowBusiness,
            Mutation {
                no_renewal: true,
                ..none
            },
            VACUOUS,
        ),
        (
            Variant::Redlock,
            Scenario::SlowBusiness,
            Mutation {
                no_renewal: true,
                ..none
            },
            VACUOUS,
        ),
        // Late renewals: only the local deadline stops a write after the lease ran out.
        (
            Variant::Watchdog,
            Scenario::SlowBusiness,
            Mutation {
                no_local_deadline: true,
                ..none
            },
            "oversells",
        ),
        // The watchdog noticed, but the section writes anyway.
        (
            Variant::Watchdog,
            Scenario::LockVanishesEarly,
            Mutation {
                no_lost_check: true,
                ..none
            },
            "oversells",
        ),
        // Two buyers take one expired lock over, both GETSETs believed.
        (
            Variant::SetnxExpiry,
            Scenario::CrashAfterAcquire,
            Mutation {
                no_getset_compare: true,
                ..none
            },
            "oversells",
        ),
        // Redlock with one vote, or counting votes that expired mid-round.
        (
            Variant::Redlock,
            Scenario::Race,
            Mutation {
                one_vote: true,
                ..none
            },
            "oversells",
        ),
        (
            Variant::Redlock,
            Scenario::Race,
            Mutation {
                no_validity: true,
                ..none
            },
            "oversells",
        ),
        // Without WAIT, the lock the failover lost is believed.
        (
            Variant::Token,
            Scenario::FailoverWaitEarly,
            Mutation {
                no_wait: true,
                ..none
            },
            "oversells",
        ),
        // A write whose read came before Redis restarted empty lands.
        (
            Variant::Token,
            Scenario::RedisRestart,
            Mutation {
                no_epoch_check: true,
                ..none
            },
            "oversells",
        ),
        // The first attempt, whose claim a retry took over, writes anyway.
        (
            Variant::Watchdog,
            Scenario::RetryStorm,
            Mutation {
                no_claim_check: true,
                ..none
            },
            "oversells",
        ),
        // Retries of one request id with no claim and no record: each sells.
        (
            Variant::Token,
            Scenario::RetryStorm,
            Mutation {
                no_request_claim: true,
                ..none
            },
            "oversells",
        ),
        (
            Variant::Lua,
            Scenario::RetryStorm,
            Mutation {
                no_request_claim: true,
                ..none
            },
            "oversells",
        ),
        // A commit whose answer PostgreSQL's crash lost, asked again with
        // no record of its id: sold twice.
        (
            Variant::PgUpdate,
            Scenario::PostgresRestart,
            Mutation {
                no_request_claim: true,
                ..none
            },
            "oversells",
        ),
        (
            Variant::PgForUpdate,
            Scenario::PostgresRestart,
            Mutation {
                no_request_claim: true,
                ..none
            },
            "oversells",
        ),
        (
            Variant::PgOptimistic,
            Scenario::CommitAnswerLost,
            Mutation {
                no_request_claim: true,
                ..none
            },
            "oversells",
        ),
        (
            Variant::PgAdvisory,
            Scenario::CommitAnswerLost,
            Mutation {
                no_request_claim: true,
                ..none
            },
            "oversells",
        ),
        // pg-update's UPDATE without `remaining > 0`: past zero, a unit
        // that never existed is sold.
        (
            Variant::PgUpdate,
            Scenario::Race,
            Mutation {
                no_stock_check: true,
                ..none
            },
            "oversells",
        ),
        // pg-optimistic's write without its version compare: two buyers
        // that read the same stock both write it minus one (a lost update).
        (
            Variant::PgOptimistic,
            Scenario::Race,
            Mutation {
                no_version_check: true,
                ..none
            },
            "oversells",
        ),
        // Without the id's unique key, two attempts of one id that both
        // looked it up before either committed both sell.
        (
            Variant::PgUpdate,
            Scenario::RetryStorm,
            Mutation {
                no_request_claim: true,
                ..none
            },
            "oversells",
        ),
        (
            Variant::PgOptimistic,
            Scenario::RetryStorm,
            Mutation {
                no_request_claim: true,
                ..none
            },
            "oversells",
        ),
        // The database's lock not taken (no FOR UPDATE, no advisory
        // lock): two buyers read the same stock and both write it.
        (
            Variant::PgForUpdate,
            Scenario::Race,
            Mutation {
                no_database_lock: true,
                ..none
            },
            "oversells",
        ),
        (
            Variant::PgAdvisory,
            Scenario::Race,
            Mutation {
                no_database_lock: true,
                ..none
            },
            "oversells",
        ),
        // pg-batch's row lock not taken: two batches read the same stock
        // and both write it less their own (an absolute write).
        (
            Variant::PgBatch,
            Scenario::Race,
            Mutation {
                no_database_lock: true,
                ..none
            },
            "oversells",
        ),
        // A batch whose commit's answer was lost, asked again with no
        // record of its id: sold twice.
        (
            Variant::PgBatch,
            Scenario::CommitAnswerLost,
            Mutation {
                no_request_claim: true,
                ..none
            },
            "oversells",
        ),
        // A database lock with no idle timeout: a frozen holder keeps it
        // for as long as it is frozen, and nobody sells meanwhile.
        (
            Variant::PgForUpdate,
            Scenario::PauseHolder,
            Mutation {
                no_idle_timeout: true,
                ..none
            },
            VACUOUS,
        ),
        (
            Variant::PgAdvisory,
            Scenario::PauseHolder,
            Mutation {
                no_idle_timeout: true,
                ..none
            },
            VACUOUS,
        ),
        // Redis's sold-out as the answer by itself: the unit a killed
        // buyer took in Redis is never sold, and a buyer is told sold out
        // while the database holds it.
        (
            Variant::RedisThenPg,
            Scenario::KillInstance,
            Mutation {
                redis_sold_out_final: true,
                ..none
            },
            "loses units",
        ),
    ];
    let mut kept = Vec::new();
    for (variant, scenario, mutation, flipped) in cases {
        let as_is = verdict(variant, scenario);
        assert!(as_is.agrees, "{variant} {scenario}: {}", as_is.model);
        let without = check_mutated(variant, scenario, &Limits::default(), mutation).unwrap();
        if without.model != flipped {
            kept.push(format!(
                "{variant} {scenario} without {mutation:?}: {} (expected {flipped})",
                without.model
            ));
        }
    }
    assert!(kept.is_empty(), "{kept:#?}");
}
