//! The database variants' mechanisms taken out one at a time (live
//! mutants of a debug build, `STOCKLOCK_MUTANT`, which `up` and its
//! instances inherit): each flips its variant's `race` cell from safe to
//! oversells, found by the lab's ledger judge and, from the buyers'
//! answers alone, by the history checker. The code with the mechanism
//! passes the same cell in the lab's matrix test.

use std::time::Duration;

use stocklock::lab::Scenario;
use stocklock::variants::Variant;

use crate::lab::{find, lab};

/// Each mutant and the variant whose mechanism it takes out.
const MUTANTS: [(&str, Variant); 4] = [
    // The row's lock: two buyers read the same stock and both write it.
    ("no-row-lock", Variant::PgForUpdate),
    // The advisory lock on the SKU's name: the same lost update.
    ("no-advisory-lock", Variant::PgAdvisory),
    // The version compare: a write on a moved row lands.
    ("no-version-check", Variant::PgOptimistic),
    // `remaining > 0`: the decrement goes past zero, selling units that
    // never existed (the ledger counts them oversold; the history checker
    // reads unit 0, which no stock holds).
    ("no-stock-check", Variant::PgUpdate),
];

#[tokio::test]
async fn each_database_mechanism_taken_out_oversells_its_race_for_both_judges() {
    if !stocklock::up::postgres::installed() {
        crate::helpers::missing_tool("PostgreSQL is not installed (scripts/deps.sh postgresql)");
        return;
    }
    for (mutant, variant) in MUTANTS {
        let (output, report) = lab(
            &["race", "--variant", variant.name()],
            &[("STOCKLOCK_MUTANT", mutant)],
            Duration::from_secs(120),
        )
        .await;
        assert_eq!(output.status.code(), Some(2), "{mutant}: the lab passed");
        let cells = report["cells"].as_array().unwrap();
        let cell = find(cells, Scenario::Race, variant).unwrap();
        assert_eq!(cell["observed"], "oversells", "{mutant}: {cell}");
        assert!(
            cell["history"].as_str().unwrap().starts_with("unsafe"),
            "{mutant}: {cell}"
        );
        assert!(
            !cell["evidence"].as_str().unwrap().contains("DISAGREE"),
            "{mutant}: {cell}"
        );
    }
}

/// Without `idle_in_transaction_session_timeout` (the live mutant
/// `no-idle-timeout`), a database lock's holder frozen, then one cut off
/// from PostgreSQL, keeps its lock for as long as it is silent: the lab's
/// `pause-holder` sees the SKU stuck (the newcomer sold only once the
/// holder spoke again, and the holder's late write landed). The history
/// checker, which judges what buyers were told and not when, finds those
/// answers linearizable: it judged the run, and only the lab's clock sees
/// this failure. The code with the timeout passes the same cells in the
/// lab's matrix test.
#[tokio::test]
async fn a_database_lock_without_an_idle_timeout_is_stuck_while_its_holder_is_silent() {
    if !stocklock::up::postgres::installed() {
        crate::helpers::missing_tool("PostgreSQL is not installed (scripts/deps.sh postgresql)");
        return;
    }
    let locks = [Variant::PgForUpdate, Variant::PgAdvisory];
    let (output, report) = lab(
        &["pause-holder", "--variant", "pg-for-update,pg-advisory"],
        &[("STOCKLOCK_MUTANT", "no-idle-timeout")],
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(output.status.code(), Some(2), "the lab passed: {report}");
    let cells = report["cells"].as_array().unwrap();
    for variant in locks {
        let cell = find(cells, Scenario::PauseHolder, variant).unwrap();
        assert_eq!(cell["observed"], "stuck", "{cell}");
        let evidence = cell["evidence"].as_str().unwrap();
        for trial in ["froze 1.5 s", "cut off from PostgreSQL for 1.5 s"] {
            assert!(evidence.contains(trial), "{trial}: {evidence}");
        }
        assert_eq!(
            evidence
                .matches("the database never ended the silent holder's session")
                .count(),
            2,
            "{evidence}"
        );
        assert!(
            cell["history"]
                .as_str()
                .unwrap()
                .starts_with("linearizable"),
            "{cell}"
        );
    }
}

/// The contrast of the database's request ids: each database variant
/// with its id hidden from the database (the live mutant `no-id-record`:
/// nothing looked up, nothing recorded, no unique key) oversells in both
/// cells where a commit's answer is lost: `commit-answer-lost`, and
/// `postgres-restart`, whose crash comes after a sale whose commit ran and
/// whose answer was lost. The retry of that id is sold a unit anew, its
/// first still committed: one purchase, two units. And in `retry-storm`,
/// sixteen attempts of one id at once each sell. The lab's judge and the history
/// checker both say so; with the record, the lab's matrix test passes the
/// same cells.
#[tokio::test]
async fn retrying_a_lost_commit_without_the_ids_record_oversells_for_both_judges() {
    if !stocklock::up::postgres::installed() {
        crate::helpers::missing_tool("PostgreSQL is not installed (scripts/deps.sh postgresql)");
        return;
    }
    let variants = [
        Variant::PgUpdate,
        Variant::PgForUpdate,
        Variant::PgOptimistic,
        Variant::PgAdvisory,
        Variant::RedisThenPg,
    ];
    let names: Vec<&str> = variants.iter().map(|v| v.name()).collect();
    let (output, report) = lab(
        &[
            "postgres-restart",
            "commit-answer-lost",
            "retry-storm",
            "--variant",
            &names.join(","),
        ],
        &[("STOCKLOCK_MUTANT", "no-id-record")],
        Duration::from_secs(180),
    )
    .await;
    assert_eq!(output.status.code(), Some(2), "the lab passed: {report}");
    let cells = report["cells"].as_array().unwrap();
    for scenario in [
        Scenario::PostgresRestart,
        Scenario::CommitAnswerLost,
        Scenario::RetryStorm,
    ] {
        for variant in variants {
            let cell = find(cells, scenario, variant).unwrap();
            assert_eq!(cell["observed"], "oversells", "{cell}");
            let evidence = cell["evidence"].as_str().unwrap();
            let replayed = match scenario {
                // Sixteen attempts of one id at once: the id's key is gone
                // too, so each attempt that finds a unit sells it.
                Scenario::RetryStorm => "replays 0",
                _ => "0 replayed their record",
            };
            assert!(
                evidence.contains(replayed) && !evidence.contains("DISAGREE"),
                "{cell}"
            );
            assert!(
                cell["history"].as_str().unwrap().starts_with("unsafe"),
                "{cell}"
            );
        }
    }
}
