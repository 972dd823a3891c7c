//! Each cell of the matrix shows why it ended as it did: the fault landed
//! where the scenario says, and the safe ones are safe for the reason
//! their claim gives. Checked on the matrix's own run (`matrix.rs`):
//! every cell is played once in the suite.

use serde_json::Value;
use stocklock::lab::Scenario;
use stocklock::variants::Variant;

use super::find;

/// Cells with what they must observe and pieces of their evidence (the
/// order scenarios' books, the database's, the pause's ids), whatever
/// their variants' claims say: a claim changed to fit a broken variant
/// fails here.
const SHOWN: &[(Scenario, Variant, &str, &[&str])] = &[
    (
        Scenario::PauseHolder,
        Variant::Fenced,
        "safe",
        &["holder answered 429 stale_token"],
    ),
    (
        Scenario::LockVanishesEarly,
        Variant::Watchdog,
        "safe",
        &["holder answered 429 lock_lost"],
    ),
    // A database lock's holder frozen, then cut off: the database ended
    // each silent session (its idle timeout), its late write refused.
    (
        Scenario::PauseHolder,
        Variant::PgForUpdate,
        "safe",
        &[
            "frozen: froze 1.5 s; holder answered 429 lock_lost",
            "then cut off from PostgreSQL for 1.5 s; holder answered 429 lock_lost",
        ],
    ),
    (
        Scenario::PauseHolder,
        Variant::PgAdvisory,
        "safe",
        &[
            "frozen: froze 1.5 s; holder answered 429 lock_lost",
            "then cut off from PostgreSQL for 1.5 s; holder answered 429 lock_lost",
        ],
    ),
    // Deleted after the last renewal before the write: the watchdog
    // cannot notice; only the fence refuses the stale write.
    (
        Scenario::LockVanishes,
        Variant::Watchdog,
        "oversells",
        &["lock deleted after the holder's renewal at "],
    ),
    (
        Scenario::LockVanishes,
        Variant::Fenced,
        "safe",
        &["holder answered 429 stale_token"],
    ),
    (
        Scenario::ClockSkew,
        Variant::Token,
        "safe",
        &["the newcomer 429 lock_held"],
    ),
    (
        Scenario::CrashAfterAcquire,
        Variant::Setnx,
        "deadlock",
        &["lock after: held with no TTL"],
    ),
    (
        Scenario::KillInstance,
        Variant::Token,
        "frees",
        &["announced from inside its section"],
    ),
    (
        Scenario::RedisRestart,
        Variant::Lua,
        "recovers",
        &["while down: 503"],
    ),
    // Buyers told `unknown` by a paused Redis, every id resolved after.
    (
        Scenario::RedisPause,
        Variant::Lua,
        "safe",
        &[" answered unknown", ", 0 unresolved;"],
    ),
    (
        Scenario::RedisPause,
        Variant::LuaBatch,
        "safe",
        &[" answered unknown", ", 0 unresolved;"],
    ),
    (
        Scenario::RedisPause,
        Variant::LuaSharded,
        "safe",
        &[" answered unknown", ", 0 unresolved;"],
    ),
    (
        Scenario::Failover,
        Variant::Token,
        "oversells",
        &["Sentinel promoted"],
    ),
    (Scenario::Failover, Variant::Etcd, "safe", &["etcd leader"]),
    (
        Scenario::Failover,
        Variant::ZooKeeper,
        "safe",
        &["ZooKeeper leader"],
    ),
    (
        Scenario::FailoverWaitEarly,
        Variant::Token,
        "safe",
        &["holder answered 429 not_replicated"],
    ),
    // The new master's ledger was rolled back with the sale: the two
    // answers show the unit sold twice.
    (
        Scenario::FailoverWait,
        Variant::Token,
        "oversells",
        &["unit 5 sold twice"],
    ),
    // The crash between the sale and its XADD loses exactly the unit it
    // struck (the third sold of 10: unit 8); inside one script, nothing.
    (
        Scenario::CrashBeforeEnqueue,
        Variant::LuaThenQueue,
        "loses units",
        &[
            "crashed after the script of the armed sale (unit 8), back as pid",
            "books: 1 lost (sold, no order) (units 8); sold 5, orders 4",
        ],
    ),
    (
        Scenario::CrashBeforeEnqueue,
        Variant::LuaStream,
        "safe",
        &[
            "crashed after the script of the armed sale (unit 8), back as pid",
            "books: clean: 5 sold, 5 orders",
        ],
    ),
    // A worker that dies between its commit and its ack: its messages are
    // delivered again and inserted once; nothing unacked is left.
    (
        Scenario::WorkerCrashBeforeAck,
        Variant::LuaThenQueue,
        "safe",
        &[
            "before its XACK: instance",
            "books: clean: 4 sold, 4 orders",
        ],
    ),
    (
        Scenario::WorkerCrashBeforeAck,
        Variant::LuaStream,
        "safe",
        &[
            "before its XACK: instance",
            "books: clean: 4 sold, 4 orders",
        ],
    ),
    // PostgreSQL down: buyers still get 200, the orders wait in the
    // stream and are all written once it is back.
    (
        Scenario::PostgresRestart,
        Variant::LuaThenQueue,
        "safe",
        &[
            "(answers 200 sold, 200 sold, 200 sold), the orders' view answered 503 meanwhile",
            "books: clean: 5 sold, 5 orders",
        ],
    ),
    (
        Scenario::PostgresRestart,
        Variant::LuaStream,
        "safe",
        &[
            "(answers 200 sold, 200 sold, 200 sold), the orders' view answered 503 meanwhile",
            "books: clean: 5 sold, 5 orders",
        ],
    ),
    // The crash comes after a sale whose commit's answer was lost: its
    // record survived, and its retry replayed it.
    (
        Scenario::PostgresRestart,
        Variant::PgForUpdate,
        "safe",
        &[
            "pg-for-update-crash-2's commit answer lost; PostgreSQL killed",
            "on retry 1 replayed their record",
        ],
    ),
    // redis-then-pg's two books, drained after the database's crash,
    // meet at zero.
    (
        Scenario::PostgresRestart,
        Variant::RedisThenPg,
        "safe",
        &[
            "; drained until sold out: Redis 0 left, ",
            "the database 0 left, 10 sold: both books agree",
        ],
    ),
    // Unpaid reservations give their unit back once (a second pass gives
    // nothing), paid ones never.
    (
        Scenario::ReservationExpiry,
        Variant::LuaThenQueue,
        "safe",
        &[
            "the second expired 0, returned 0 (again 0, stale 0)",
            "orders 6 (3 paid, 0 pending, 3 expired), returned 3, stock 7 of 10",
        ],
    ),
    (
        Scenario::ReservationExpiry,
        Variant::LuaStream,
        "safe",
        &[
            "the second expired 0, returned 0 (again 0, stale 0)",
            "orders 6 (3 paid, 0 pending, 3 expired), returned 3, stock 7 of 10",
        ],
    ),
    // Redis comes back empty with three orders in flight: they are gone
    // with it (the buyers were told sold), and reconcile says so: the two
    // orders written before are orphaned (`LEDGER_LOST`), the three sales
    // after the reset each have their order.
    (
        Scenario::RedisDataLoss,
        Variant::LuaThenQueue,
        "loses units",
        DATA_LOSS,
    ),
    (
        Scenario::RedisDataLoss,
        Variant::LuaStream,
        "loses units",
        DATA_LOSS,
    ),
];

const DATA_LOSS: &[&str] = &[
    "3 sales (200 sold, 200 sold, 200 sold) in flight when Redis restarted empty",
    "books: LEDGER_LOST: orphaned epochs: 2 orders (of 1 epochs the ledger never opened: ",
    "this epoch: clean: 3 sold, 3 orders",
    "5 orders in PostgreSQL for 8 sales answered sold (2 written before the loss, 3 in flight, 3 after the reset)",
];

/// Every cell of [`SHOWN`] among `scenarios` (the half of the matrix
/// played) observed what it must, with its evidence.
pub(super) fn each_cell_shows_its_cause(scenarios: &[Scenario], cells: &[Value]) {
    for &(scenario, variant, observed, pieces) in SHOWN {
        if !scenarios.contains(&scenario) {
            continue;
        }
        let cell = find(cells, scenario, variant)
            .unwrap_or_else(|| panic!("no cell {scenario} / {variant}"));
        assert_eq!(cell["observed"], observed, "{cell}");
        let text = cell["evidence"].as_str().unwrap();
        for piece in pieces {
            assert!(
                text.contains(piece),
                "{scenario} / {variant}: {piece:?} not in {text}"
            );
        }
    }
    // A pause that cut nobody off would show nothing: its cells' buyers
    // were told `unknown` (at least one each).
    let paused = match scenarios.contains(&Scenario::RedisPause) {
        true => &[Variant::Lua, Variant::LuaBatch, Variant::LuaSharded][..],
        false => &[],
    };
    for &variant in paused {
        let cell = find(cells, Scenario::RedisPause, variant).unwrap();
        let text = cell["evidence"].as_str().unwrap();
        let in_doubt: usize = text
            .split_once(" answered unknown")
            .and_then(|(before, _)| before.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{text}"));
        assert!(in_doubt > 0, "{text}");
    }
}
