use super::model::{Action, Mutation};
use super::order::OrderStep;
use super::*;

fn verdict(variant: Variant, scenario: Scenario) -> Verdict {
    check(variant, scenario).expect("a modelled cell")
}

/// The shortest counterexample to `property` for `variant` in `scenario`
/// with `mutation`, if any.
fn counterexample(
    variant: Variant,
    scenario: Scenario,
    mutation: Mutation,
    property: Property,
) -> Option<Vec<Step>> {
    let protocol = Protocol::of(variant);
    let bounds = bounds(scenario, protocol);
    let (found, _, _) = explore(protocol, bounds, mutation, &[property]);
    found
        .into_iter()
        .next()
        .map(|(sale, path)| steps(&sale, &path))
}

/// The whole matrix: every cell has a model, and each model's verdict is
/// its variant's claim (the claims the lab judges, read from each
/// variant's `About`), within the bounds. About 2 s in a debug build.
#[test]
fn every_cell_of_the_matrix_agrees_with_its_model() {
    let all = cells();
    let applicable = Variant::ALL
        .iter()
        .flat_map(|&v| Scenario::ALL.map(|s| s.claim(v).applies()))
        .filter(|&applies| applies)
        .count();
    assert_eq!(all.len(), applicable);
    assert!(all.len() >= 103, "{} cells", all.len());
    let disagree: Vec<String> = all
        .into_iter()
        .map(|(variant, scenario)| verdict(variant, scenario))
        .filter(|v| !v.agrees)
        .map(|v| {
            format!(
                "{} {}: claim {}, model {}",
                v.variant, v.scenario, v.claim, v.model
            )
        })
        .collect();
    assert!(disagree.is_empty(), "{disagree:#?}");
}

/// `variant` keeps `property` in `scenario` as modelled, and breaks it
/// with `mutation` (a protection taken out): the shortest counterexample.
fn broken_without(
    variant: Variant,
    scenario: Scenario,
    mutation: Mutation,
    property: Property,
) -> Vec<Step> {
    let cell = format!("{variant} in {scenario}: \"{property}\"");
    let kept = counterexample(variant, scenario, Mutation::default(), property);
    assert!(kept.is_none(), "{cell} breaks as modelled: {kept:#?}");
    counterexample(variant, scenario, mutation, property)
        .unwrap_or_else(|| panic!("{cell} holds without {mutation:?}"))
}

/// The plain-DEL mutation's own property: a release frees another's lock.
#[test]
fn a_plain_del_frees_the_next_holders_lock() {
    let plain_del = Mutation {
        plain_del_release: true,
        ..Mutation::default()
    };
    let trace = broken_without(
        Variant::Token,
        Scenario::SlowBusiness,
        plain_del,
        Property::OwnLock,
    );
    assert_eq!(trace.last().unwrap().text, "A releases", "{trace:#?}");
}

/// The protections of a paused Redis and of the order pipeline, taken
/// out one at a time: each failure they prevent comes back.
#[test]
fn the_request_record_and_the_pipelines_guards_each_matter() {
    let none = Mutation::default();
    // A script that neither records nor checks the buyer's request id: the
    // retry sells, then the cut-off call's queued script sells again.
    let no_record = Mutation {
        no_request_claim: true,
        ..none
    };
    let trace = broken_without(
        Variant::Lua,
        Scenario::RedisPause,
        no_record,
        Property::OneSale,
    );
    let texts: Vec<&str> = trace.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "A's call waits on a paused Redis: told unknown, its script queued",
            "A asks again with its request id: sells unit 2",
            "Redis wakes and runs A's queued script: sells unit 1",
        ]
    );
    // An insert without ON CONFLICT: the redelivered message's second row.
    let no_conflict = Mutation {
        no_on_conflict: true,
        ..none
    };
    let trace = broken_without(
        Variant::LuaStream,
        Scenario::WorkerCrashBeforeAck,
        no_conflict,
        Property::OrderedOnce,
    );
    assert!(
        trace
            .iter()
            .any(|s| s.action == Action::Order(OrderStep::WorkerCrash)),
        "{trace:#?}"
    );
    // A give-back that does not record the sale's return: two passes
    // give one unit back twice.
    let twice = Mutation {
        no_give_back_once: true,
        ..none
    };
    let trace = broken_without(
        Variant::LuaStream,
        Scenario::ReservationExpiry,
        twice,
        Property::OrderedOnce,
    );
    let back = trace
        .iter()
        .filter(|s| matches!(s.action, Action::Order(OrderStep::GiveBack(_))))
        .count();
    assert_eq!(back, 2, "{trace:#?}");
}

/// Breadth first, a counterexample is a shortest one: its length for two
/// known cells, and its steps.
#[test]
fn the_shortest_counterexamples_are_stable() {
    let stuck = verdict(Variant::Setnx, Scenario::CrashAfterAcquire);
    let texts: Vec<&str> = stuck.trace.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(texts, ["A takes the lock", "A crashes"]);
    assert_eq!(stuck.broken, Some(Property::Stuck));
    // Two buyers read the same stock and both write it.
    let race = verdict(Variant::None, Scenario::Race);
    assert_eq!(race.trace.len(), 8, "{:#?}", race.trace);
    assert_eq!(race.broken, Some(Property::Safety));
    // Redlock: a node that granted the lock forgets it under the frozen holder.
    let restart = verdict(Variant::Redlock, Scenario::RedlockRestartWithoutPersistence);
    assert!(
        restart
            .trace
            .iter()
            .any(|s| matches!(s.action, Action::Restart(_))),
        "{:#?}",
        restart.trace
    );
    let pause = verdict(Variant::Token, Scenario::PauseHolder);
    assert_eq!(pause.trace.len(), 12, "{:#?}", pause.trace);
    // lua-then-queue's unit is lost between its script and its XADD;
    // lua-stream's XADD is in its script, and a Redis that restarts empty
    // loses the message before any worker reads it.
    let lost = verdict(Variant::LuaThenQueue, Scenario::CrashBeforeEnqueue);
    let texts: Vec<&str> = lost.trace.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(texts, ["A sells unit 2 in one script", "A crashes"]);
    assert_eq!(lost.broken, Some(Property::OrdersKept));
    let kept = verdict(Variant::LuaStream, Scenario::CrashBeforeEnqueue);
    assert_eq!((kept.model, kept.broken), ("safe", None));
    let loss = verdict(Variant::LuaStream, Scenario::RedisDataLoss);
    let texts: Vec<&str> = loss.trace.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "A sells unit 2 in one script (its order's message in it)",
            "Redis restarts empty (the stream's messages with it); the SKU is reset",
        ]
    );
}

/// A trace replayed step by step against the model: each step is one the
/// model allows where it is taken, and the last state breaks the property.
#[test]
fn a_counterexample_replayed_reaches_the_violation() {
    for (variant, scenario) in cells() {
        let v = verdict(variant, scenario);
        let Some(broken) = v.broken else { continue };
        let (sale, worlds) = draw::replay(&v).expect("a trace the model takes");
        for (n, step) in v.trace.iter().enumerate() {
            let mut allowed = Vec::new();
            sale.actions(&worlds[n], &mut allowed);
            assert!(
                allowed.contains(&step.action),
                "{} {}: step {} ({}) is not allowed there",
                v.variant,
                v.scenario,
                n + 1,
                step.text
            );
        }
        let breaks = !holds(broken, &sale, worlds.last().unwrap());
        assert!(breaks, "{} {}: the replay ends fine", v.variant, v.scenario);
    }
}

/// A model that parts from its claim is marked in the table and makes the
/// command's last line say so, and the command exit 2.
#[test]
fn a_model_that_disagrees_is_marked_and_fails_the_command() {
    let agreed = verdict(Variant::Setnx, Scenario::CrashAfterAcquire);
    let (line, agree) = report::closing(std::slice::from_ref(&agreed), 0.1);
    assert!(agree, "{line}");
    assert_eq!(
        line,
        "1 cells checked in 0.1 s: every model agrees with its variant's claim"
    );
    // The same model, had setnx claimed to free its lock after a crash.
    let parted = Verdict {
        claim: "frees",
        agrees: false,
        ..agreed.clone()
    };
    let (line, agree) = report::closing(&[agreed, parted.clone()], 0.1);
    assert!(!agree, "{line}");
    assert!(
        line.ends_with("1 disagree with their variant's claim"),
        "{line}"
    );
    let table = report::table(&[parted]);
    assert!(
        table.contains("frees      deadlock") && table.contains("<< DISAGREES"),
        "{table}"
    );
}

/// The table names each cell, its counterexample's steps and the bounds.
#[test]
fn the_table_prints_each_trace_and_the_bounds() {
    let table = report::table(&[verdict(Variant::Setnx, Scenario::CrashAfterAcquire)]);
    assert!(table.contains("counterexample in 2 steps"), "{table}");
    assert!(table.contains("2. t=0 A crashes"), "{table}");
    assert!(
        table.contains("crash-after-acquire: 3 buyers, stock 2, lease 2, work 0, up to tick 8, 1 crash anywhere"),
        "{table}"
    );
}

/// A counterexample drawn as a timeline: a lane per buyer, the two
/// sections that sold one unit overlapping, the ledger's verdict; a crash
/// as a chaos event and the dead holder's section left unknown.
#[test]
fn a_counterexample_is_drawn_as_a_timeline() {
    let race = draw::timeline(&verdict(Variant::None, Scenario::Race)).unwrap();
    let sold: Vec<(&str, Option<i64>)> = race
        .sections
        .iter()
        .map(|s| (s.instance.as_str(), s.unit))
        .collect();
    assert_eq!(sold, [("A", Some(2)), ("B", Some(2))], "{race:#?}");
    assert_eq!(race.overlap_count, 1);
    assert_eq!(race.verdict, "DUPLICATES 1");
    let stuck = draw::timeline(&verdict(Variant::Setnx, Scenario::CrashAfterAcquire)).unwrap();
    assert_eq!(stuck.events.len(), 1);
    assert_eq!(
        (
            stuck.events[0].kind.as_str(),
            stuck.events[0].instance.as_deref()
        ),
        ("crash", Some("A"))
    );
    assert_eq!(stuck.sections[0].reason.as_deref(), Some("crashed"));
    // setnx died before its EXPIRE: no lease, and the lock held to the end.
    assert_eq!(stuck.sections[0].lease_ms, None);
    assert_eq!(stuck.sections[0].exit_ns, stuck.events[0].at_ns);
    assert_eq!(stuck.sections[0].release_ns, Some(stuck.to_ns));
    assert_eq!(stuck.verdict, "STUCK");
    // A sale whose order never comes: the script's sale, the crash, and
    // the verdict a live run's reconcile would give.
    let lost = draw::timeline(&verdict(
        Variant::LuaThenQueue,
        Scenario::CrashBeforeEnqueue,
    ));
    let lost = lost.unwrap();
    let drawn: Vec<(&str, Option<i64>, bool)> = lost
        .sections
        .iter()
        .map(|s| (s.outcome.as_ref(), s.unit, s.atomic))
        .collect();
    assert_eq!(drawn, [("sold", Some(2), true)]);
    assert_eq!(lost.events[0].kind, "crash");
    assert_eq!(lost.verdict, "LOST 1");
    // A freeze, the lease and the watchdog's word on the page's terms.
    let pause = draw::timeline(&verdict(Variant::Watchdog, Scenario::PauseHolder)).unwrap();
    assert!(
        pause.events.iter().any(|e| e.kind == "freeze"),
        "{pause:#?}"
    );
    assert!(pause.sections.iter().all(|s| s.lease_ms.is_some()));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("race.html");
    assert!(draw::write(&verdict(Variant::None, Scenario::Race), &path).unwrap());
    let page = std::fs::read_to_string(&path).unwrap();
    assert!(page.contains("timeline-data") && page.contains("none · race (model)"));
    // A cell with no counterexample draws its witness: lua's one sale.
    let safe = verdict(Variant::Lua, Scenario::Race);
    let witness = draw::timeline(&safe).unwrap();
    let drawn: Vec<(&str, Option<i64>)> = witness
        .sections
        .iter()
        .map(|s| (s.outcome.as_ref(), s.unit))
        .collect();
    assert_eq!(drawn, [("sold", Some(2))]);
    assert_eq!(witness.verdict, "SAFE");
    let path = dir.path().join("lua.html");
    assert!(draw::write(&safe, &path).unwrap() && path.exists());
}

#[test]
fn a_count_of_steps_is_said_in_words() {
    assert_eq!(
        (steps_in_words(1), steps_in_words(14)),
        ("1 step".to_owned(), "14 steps".to_owned())
    );
    // lua's race rests on a witness of one step (it said "in 1 steps").
    let lua = verdict(Variant::Lua, Scenario::Race);
    assert_eq!(lua.witness.len(), 1);
    assert!(
        lua.summary().ends_with("witness in 1 step"),
        "{}",
        lua.summary()
    );
}
