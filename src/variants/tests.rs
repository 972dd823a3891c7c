//! The variants' unit tests: names, teaching text, the facts each
//! variant's [`About`] states, and every claim of the matrix against a
//! snapshot of the tables as they were before the families.

use super::*;

#[test]
fn names_round_trip_and_are_unique() {
    for v in Variant::ALL {
        assert_eq!(v.name().parse::<Variant>(), Ok(v));
    }
    let mut names = Variant::names();
    names.dedup();
    assert_eq!(names.len(), Variant::ALL.len());
    assert!("Lua".parse::<Variant>().is_err());
}

#[test]
fn every_variant_explains_itself() {
    for v in Variant::ALL {
        let info = v.info();
        assert!(info.explanation.len() > 200, "{v}: explanation too short");
        assert!(!info.code.is_empty(), "{v}: no code");
        assert!(!info.expected.two_instances.is_empty());
    }
}

/// The variants of which `fact` holds, by name.
fn having(fact: impl Fn(Variant) -> bool) -> Vec<&'static str> {
    Variant::ALL
        .into_iter()
        .filter(|&v| fact(v))
        .map(Variant::name)
        .collect()
}

/// What the `match`es on [`Variant`] said before the facts moved to each
/// variant's [`About`], variant by variant.
#[test]
fn each_variant_states_the_facts_the_matches_said() {
    assert_eq!(
        Variant::ALL.map(Variant::name),
        [
            "none",
            "local-mutex",
            "setnx",
            "setnx-expiry",
            "token",
            "watchdog",
            "fenced",
            "redlock",
            "etcd",
            "zookeeper",
            "lua",
            "lua-batch",
            "lua-sharded",
            "lua-then-queue",
            "lua-stream",
            "pg-update",
            "pg-for-update",
            "pg-optimistic",
            "pg-advisory",
            "pg-batch",
            "redis-then-pg",
        ]
    );
    assert_eq!(
        having(Variant::scripted),
        [
            "lua",
            "lua-batch",
            "lua-sharded",
            "lua-then-queue",
            "lua-stream"
        ]
    );
    assert_eq!(
        having(Variant::stock_in_postgres),
        [
            "pg-update",
            "pg-for-update",
            "pg-optimistic",
            "pg-advisory",
            "pg-batch",
            "redis-then-pg"
        ]
    );
    assert_eq!(having(Variant::orders), ["lua-then-queue", "lua-stream"]);
    assert_eq!(
        having(Variant::takes_lock),
        [
            "local-mutex",
            "setnx",
            "setnx-expiry",
            "token",
            "watchdog",
            "fenced",
            "redlock",
            "etcd",
            "zookeeper"
        ]
    );
    // Who checks the ids (the seller's claim, or the variant itself), and
    // where the answers are counted, as the seller's flags said.
    for v in Variant::ALL {
        let about = v.about();
        assert_eq!(
            about.facts.own_ids(),
            v.scripted() || v.stock_in_postgres(),
            "{v}"
        );
        let counted = match () {
            _ if v.stock_in_postgres() => Counted::ByInstance,
            _ if v.scripted() => Counted::ScriptWithIds,
            _ => Counted::InRedis,
        };
        assert_eq!(about.facts.counted(), counted, "{v}");
        assert_eq!(about.name, v.name(), "{v}");
    }
    for v in Variant::ALL {
        let buckets = match v {
            Variant::LuaSharded => crate::knobs::DEFAULT_BUCKETS,
            _ => 0,
        };
        assert_eq!(v.buckets(), buckets, "{v}");
    }
    // Which lock store each needs: missing only where it is not given.
    let none = crate::lock::LockStores::default();
    assert_eq!(
        having(|v| v.missing_store(&none).is_some()),
        ["redlock", "etcd", "zookeeper"]
    );
    for (v, flag) in [
        (Variant::Redlock, "--redlock-nodes"),
        (Variant::Etcd, "--etcd-endpoints"),
        (Variant::ZooKeeper, "--zookeeper"),
    ] {
        assert!(v.missing_store(&none).unwrap().contains(flag), "{v}");
    }
}

/// Every variant's claims, one block per variant, as `{:#?}` prints them.
fn every_claim() -> String {
    Variant::ALL
        .into_iter()
        .map(|v| format!("{v}: {:#?}\n", v.about().claims))
        .collect()
}

/// The claims every variant ends up with are the ones its own table said
/// before the families were built (`claims.snapshot`, recorded then).
#[test]
fn every_claim_is_as_recorded() {
    let now = every_claim();
    let recorded = include_str!("claims.snapshot");
    if now != recorded {
        for (line, (a, b)) in now.lines().zip(recorded.lines()).enumerate() {
            assert_eq!(a, b, "claims.snapshot, line {}", line + 1);
        }
        assert_eq!(now.lines().count(), recorded.lines().count());
    }
}

/// What a card says in Chinese is Chinese: its Latin words are code (in
/// backticks, shown as code), identifiers and names.
#[test]
fn every_card_speaks_chinese() {
    let names = Variant::and_scenario_names();
    for variant in Variant::ALL {
        let info = variant.info();
        let texts = [
            (info.protection.clone(), info.protection_zh.clone()),
            (info.explanation.clone(), info.explanation_zh.clone()),
            (
                info.undersells.clone().unwrap_or_default(),
                info.undersells_zh.clone().unwrap_or_default(),
            ),
        ];
        for (en, zh) in texts {
            let said = crate::wire::Said { en, zh };
            assert_eq!(
                said.stray_english(&names),
                Vec::<String>::new(),
                "{variant}: {}",
                said.zh
            );
        }
    }
}
