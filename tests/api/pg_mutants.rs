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
