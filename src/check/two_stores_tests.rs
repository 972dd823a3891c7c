//! Tests of `redis-then-pg`'s mechanisms, each taken out of its model: the
//! database's answer to the buyer Redis turns away (load-bearing), the
//! lookup of the id's answer first and the give-back (not).

use super::model::Mutation;
use super::*;

fn verdict(variant: Variant, scenario: Scenario) -> Verdict {
    check(variant, scenario).expect("a modelled cell")
}

/// `redis-then-pg` in `kill-instance`: a buyer killed between its Redis
/// unit and its database write leaves Redis a unit short. As the code is,
/// the database answers the buyer Redis turns away and sells it that unit:
/// the whole stock sold through the crash. With Redis's sold-out as the
/// answer by itself, the checker finds a buyer told sold out while the
/// database still holds the unit.
#[test]
fn redis_then_pg_sells_the_unit_a_killed_buyer_took_in_redis() {
    let v = verdict(Variant::RedisThenPg, Scenario::KillInstance);
    assert_eq!(
        (v.model, v.agrees, v.witnessed),
        ("keeps selling", true, Some(Property::SellsAll)),
        "{}",
        v.summary()
    );
    let said: Vec<&str> = v.witness.iter().map(|s| s.text.as_str()).collect();
    let crash = v
        .witness
        .iter()
        .position(|s| matches!(s.action, super::model::Action::Crash(_)))
        .unwrap_or_else(|| panic!("no crash in the witness: {said:#?}"));
    assert!(
        said[..crash]
            .iter()
            .any(|t| t.contains("takes a unit in Redis")),
        "{said:#?}"
    );
    assert!(
        said[crash..]
            .iter()
            .any(|t| t.contains("it buys there with no Redis unit")),
        "{said:#?}"
    );
    let mutated = Mutation {
        redis_sold_out_final: true,
        ..Mutation::default()
    };
    let broken = check_mutated(
        Variant::RedisThenPg,
        Scenario::KillInstance,
        &Limits::default(),
        mutated,
    )
    .unwrap();
    assert_eq!(
        (broken.model, broken.broken),
        ("loses units", Some(Property::SoldOutBacked)),
        "{}",
        broken.summary()
    );
    let said: Vec<&str> = broken.trace.iter().map(|s| s.text.as_str()).collect();
    let crash = broken
        .trace
        .iter()
        .position(|s| matches!(s.action, super::model::Action::Crash(_)))
        .unwrap_or_else(|| panic!("no crash in the counterexample: {said:#?}"));
    let told = said
        .iter()
        .position(|t| t.ends_with("told sold out on Redis's word"))
        .unwrap_or_else(|| panic!("nobody told sold out: {said:#?}"));
    // Every buyer done or dead, and the database still holds the unit the
    // dead buyer took in Redis: fewer sales than the stock.
    let sales = said.iter().filter(|t| t.contains("sells unit")).count();
    assert!(
        crash != told && sales < usize::from(broken.bounds.stock),
        "{said:#?}"
    );
    // The same mutation without a crash sells what Redis let through: the
    // protection is what the crash needs, not what every sale needs.
    let race = check_mutated(
        Variant::RedisThenPg,
        Scenario::Race,
        &Limits::default(),
        mutated,
    )
    .unwrap();
    assert_eq!(race.model, "safe", "{}", race.summary());
}

/// `redis-then-pg`'s lookup of the id's answer in the database before
/// Redis, and its give-back of a refused buyer's unit, are not what keeps
/// it safe: the database answers the buyers Redis turns away (and a
/// retry's sale is refused by the id's key, its record replayed), so
/// taken out, no cell's verdict changes. (The lookup saves a Redis unit
/// and a round trip; the give-back keeps Redis's filter true, which
/// `tests/api/redis_then_pg` shows on `reconcile`.) Should either become
/// load-bearing, this fails.
#[test]
fn redis_then_pg_s_lookup_first_and_give_back_flip_no_cell() {
    let none = Mutation::default();
    let mutations = [
        Mutation {
            no_answer_first: true,
            ..none
        },
        Mutation {
            no_give_back: true,
            ..none
        },
    ];
    let mut changed = Vec::new();
    for scenario in Scenario::ALL {
        let Some(as_is) = check(Variant::RedisThenPg, scenario) else {
            continue;
        };
        for mutation in mutations {
            let without =
                check_mutated(Variant::RedisThenPg, scenario, &Limits::default(), mutation)
                    .unwrap();
            if without.model != as_is.model {
                changed.push(format!(
                    "{scenario} without {mutation:?}: {}",
                    without.model
                ));
            }
        }
    }
    assert!(changed.is_empty(), "{changed:#?}");
}
