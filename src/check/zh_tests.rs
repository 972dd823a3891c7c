//! The checker's words in Chinese: every step of every cell's schedule,
//! every property, every verdict's summary and words, and every step the
//! models can take at all (not just the shortest schedules' steps), said
//! in Chinese with no English left in it but identifiers and names.

use std::collections::{BTreeSet, HashSet, VecDeque};

use super::model::{Mutation, Sale, World};
use super::protocol::Protocol;
use super::*;
use crate::wire::Said;

/// The Latin words the Chinese may keep beyond [`Said::stray_english`]'s
/// own: the variants' and scenarios' names, and `remaining`, the stock
/// table's column an `UPDATE ... WHERE remaining > 0` names.
fn allowed() -> Vec<&'static str> {
    let mut allowed = Variant::and_scenario_names();
    allowed.push("remaining");
    allowed
}

/// What is wrong with `said` as the pages would show it: a Chinese that is
/// empty, the English itself, or English words left in it.
fn faults(said: &Said, allowed: &[&str]) -> Option<String> {
    let han = said
        .zh
        .chars()
        .any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c));
    let stray = said.stray_english(allowed);
    (said.en.is_empty() || !han || !stray.is_empty())
        .then(|| format!("{:?} / {:?}: stray {stray:?}", said.en, said.zh))
}

/// Every cell's verdict: its steps (counterexample or witness), the
/// property it breaks or rests on, its model's and claim's words and its
/// summary, in Chinese.
#[test]
fn every_verdict_of_the_matrix_is_said_in_chinese() {
    let allowed = allowed();
    let mut wrong = Vec::new();
    let mut steps = 0;
    for (variant, scenario) in cells() {
        let v = check(variant, scenario).expect("a modelled cell");
        let cell = format!("{variant} {scenario}");
        for step in v.trace.iter().chain(&v.witness) {
            steps += 1;
            let said = Said {
                en: step.text.clone(),
                zh: step.text_zh.clone(),
            };
            wrong.extend(faults(&said, &allowed).map(|f| format!("{cell}: step {f}")));
        }
        let names = [(v.broken, v.broken_zh), (v.witnessed, v.witnessed_zh)];
        for (property, zh) in names {
            assert_eq!(property.map(Property::name_zh), zh, "{cell}");
        }
        let words = [
            Said {
                en: v.model.to_owned(),
                zh: v.model_zh.to_owned(),
            },
            Said {
                en: v.claim.to_owned(),
                zh: v.claim_zh.to_owned(),
            },
            v.said_summary(),
        ];
        for said in &words {
            wrong.extend(faults(said, &allowed).map(|f| format!("{cell}: {f}")));
        }
        assert_eq!(v.summary(), v.said_summary().en);
        assert_eq!(v.summary_zh(), v.said_summary().zh);
    }
    assert!(steps > 500, "{steps} steps");
    assert!(wrong.is_empty(), "{} said wrong: {wrong:#?}", wrong.len());
}

#[test]
fn every_property_and_count_of_steps_is_said_in_chinese() {
    let allowed = allowed();
    for property in Property::ALL {
        assert_eq!(faults(&property.said(), &allowed), None, "{property:?}");
    }
    assert_eq!(steps_said(1).zh, "1 步");
    assert_eq!(steps_said(3), crate::said!("3 steps", "3 步"));
    assert_eq!(steps_in_words(14), "14 steps");
}

/// Up to `budget` states of `sale`'s model, breadth first from its start,
/// each step out of them in words.
fn said_steps(sale: &Sale, budget: usize, said: &mut Vec<Said>) {
    let mut seen: HashSet<World> = HashSet::new();
    let mut queue = VecDeque::from([sale.initial()]);
    let mut actions = Vec::new();
    while let Some(w) = queue.pop_front() {
        if seen.len() >= budget || !seen.insert(w.clone()) {
            continue;
        }
        actions.clear();
        sale.actions(&w, &mut actions);
        for &action in &actions {
            if let Some(next) = sale.next(&w, action) {
                said.push(describe(sale, &w, action, &next));
                queue.push_back(next);
            }
        }
    }
}

/// Every kind of step the models can take, well beyond the shortest
/// schedules: the first states of every cell's model, every step out of them said
/// in Chinese. Each kind is counted once, its numbers and letters left out.
#[test]
fn every_step_the_models_can_take_is_said_in_chinese() {
    let allowed = allowed();
    let mut said = Vec::new();
    for (variant, scenario) in cells() {
        let protocol = Protocol::of(variant);
        let bounds = bounds(scenario, protocol);
        let sale = Sale {
            protocol,
            bounds,
            mutation: Mutation::default(),
            property: Property::Safety,
        };
        said_steps(&sale, 3_000, &mut said);
    }
    let kind = |text: &str| -> String {
        text.chars()
            .map(|c| match c {
                '0'..='9' => '#',
                'A'..='C' if text.len() > 1 => '@',
                c => c,
            })
            .collect()
    };
    let mut kinds = BTreeSet::new();
    let mut wrong = BTreeSet::new();
    for s in &said {
        if kinds.insert(kind(&s.en)) {
            wrong.extend(faults(s, &allowed));
        }
    }
    assert!(
        kinds.len() > 100,
        "{} kinds of step: {kinds:#?}",
        kinds.len()
    );
    assert!(wrong.is_empty(), "{} said wrong: {wrong:#?}", wrong.len());
}
