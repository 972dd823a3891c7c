//! Both books after the database's faults: the lab's `postgres-restart`
//! and `commit-answer-lost` cells of `redis-then-pg` drain the stock once
//! every buyer resolved, and judge Redis's books beside the database's
//! (the stack's ledger shows the database's alone). A crash of the
//! database can leave Redis a unit short (a write whose answer was lost
//! and that did not commit keeps its Redis unit); drained, the database
//! sells that unit to a buyer Redis turned away. With the live mutant
//! `redis-says-sold-out` (Redis's sold-out answered by itself) the same
//! cell tells a buyer "sold out" with the unit still in the database, and
//! both judges say so.

use std::time::Duration;

use stocklock::lab::Scenario;
use stocklock::variants::Variant;

use crate::lab::{find, lab};

/// The cell of `scenario` run with `env`; `None` (SKIPPED, a failure
/// under CI=true) without PostgreSQL.
async fn cell(scenario: Scenario, env: &[(&str, &str)]) -> Option<(i32, serde_json::Value)> {
    if !stocklock::up::postgres::installed() {
        crate::helpers::missing_tool("PostgreSQL is not installed (scripts/deps.sh postgresql)");
        return None;
    }
    let (output, report) = lab(
        &[scenario.name(), "--variant", Variant::RedisThenPg.name()],
        env,
        Duration::from_secs(180),
    )
    .await;
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 1, "{cells:?}");
    let cell = find(cells, scenario, Variant::RedisThenPg).unwrap().clone();
    Some((output.status.code().unwrap_or(-1), cell))
}

// Unmutated, the `postgres-restart` cell (both books at zero, agreeing)
// is checked on the matrix's run: tests/api/lab/evidence.rs.

/// Mutated, a buyer Redis turned away is told sold out by Redis alone:
/// once the crash left Redis short, the drain ends with a unit in the
/// database, the lab sees it lost and the history checker the lie. On a
/// main where the lab read the database's books alone, this cell passed.
#[tokio::test]
async fn redis_answering_sold_out_alone_is_caught_by_both_judges_after_a_database_crash() {
    let mutant = [("STOCKLOCK_MUTANT", "redis-says-sold-out")];
    let Some((code, cell)) = cell(Scenario::PostgresRestart, &mutant).await else {
        return;
    };
    assert_eq!(code, 2, "{cell}");
    assert_eq!(cell["observed"], "loses units", "{cell}");
    // How many units the crash left Redis short depends on how many
    // attempts it cut off between their Redis decrement and their write
    // (one in most runs, two when a second buyer was on its way): at least
    // one, and the drain's buyer told sold out with exactly those left.
    let evidence = cell["evidence"].as_str().unwrap();
    let short = evidence
        .split_once("Redis is ")
        .and_then(|(_, rest)| rest.split_once(" unit(s) short of the database (under-sold)"))
        .and_then(|(n, _)| n.parse::<u32>().ok())
        .unwrap_or_else(|| panic!("no shortfall in {evidence}"));
    assert!(short >= 1, "{evidence}");
    assert!(
        evidence.ends_with(&format!(
            "Redis is {short} unit(s) short of the database (under-sold); a buyer was told sold out with {short} unit(s) left in the database"
        )),
        "{evidence}"
    );
    let history = cell["history"].as_str().unwrap();
    assert!(
        history.starts_with("not_linearizable")
            && history.contains("a buyer was told sold_out while stock remained")
            && history.contains("(id redis-then-pg-drain-"),
        "{history}"
    );
}
