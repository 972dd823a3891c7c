//! Tests that every verdict is earned: each rests on a schedule the search
//! found, and each fault strikes at every moment it can in reality.

use super::model::{Action, Mutation, Request, token};
use super::*;

fn verdict(variant: Variant, scenario: Scenario) -> Verdict {
    check(variant, scenario).expect("a modelled cell")
}

fn texts(steps: &[Step]) -> Vec<&str> {
    steps.iter().map(|s| s.text.as_str()).collect()
}

/// Redlock frees a dead holder's lock on a found schedule: the holder dies
/// holding a majority, time passes for its node leases, and another buyer
/// sells within a lease and a tick.
#[test]
fn redlock_frees_on_a_schedule_where_another_buyer_sells_after_the_death() {
    let v = verdict(Variant::Redlock, Scenario::CrashAfterAcquire);
    assert_eq!((v.model, v.witnessed), ("frees", Some(Property::Frees)));
    let crash = v
        .witness
        .iter()
        .position(|s| matches!(s.action, Action::Crash(_)));
    let crash = crash.expect("a crash in the witness");
    let Action::Crash(dead) = v.witness[crash].action else {
        unreachable!()
    };
    let after = &v.witness[crash..];
    assert!(
        after.iter().any(|s| s.action == Action::Tick),
        "{:#?}",
        v.witness
    );
    let sale = after
        .iter()
        .find(|s| s.text.contains("sells unit"))
        .unwrap_or_else(|| panic!("no sale after the crash: {:#?}", v.witness));
    assert!(!sale.text.starts_with(char::from(b'A' + dead)), "{sale:?}");
    assert!(sale.at <= v.witness[crash].at + v.bounds.lease + 1);
}

/// The watchdog oversells when its lock is deleted after its last renewal
/// before the write: no tick between the deletion and the holder's write.
/// Fenced stays safe there (its stale token refused); deleted early, the
/// watchdog's renewal notices and it is safe.
#[test]
fn a_lock_deleted_after_the_last_renewal_goes_unnoticed_by_the_watchdog() {
    let v = verdict(Variant::Watchdog, Scenario::LockVanishes);
    assert_eq!((v.model, v.broken), ("oversells", Some(Property::Safety)));
    let said = texts(&v.trace);
    let vanish = v
        .trace
        .iter()
        .position(|s| s.action == Action::Vanish)
        .unwrap();
    let write = said
        .iter()
        .position(|t| t.starts_with("A writes: sells"))
        .unwrap();
    let ticks_between = v.trace[vanish..write]
        .iter()
        .filter(|s| matches!(s.action, Action::Tick | Action::LateTick(_)))
        .count();
    assert!(vanish < write && ticks_between == 0, "{said:#?}");
    assert_eq!(v.claim, "oversells");
    let fenced = verdict(Variant::Fenced, Scenario::LockVanishes);
    assert_eq!((fenced.model, fenced.agrees), ("safe", true));
    let early = verdict(Variant::Watchdog, Scenario::LockVanishesEarly);
    assert_eq!((early.model, early.agrees), ("safe", true));
}

/// After a failover, replication runs again, and WAIT covers the lock,
/// not the write the failover rolled back: the unit sells twice once the
/// restored lock's lease runs out. Held back before the lock, WAIT refuses
/// the holder and the SKU still sells afterwards.
#[test]
fn wait_covers_the_lock_not_the_write_a_failover_rolls_back() {
    let v = verdict(Variant::Token, Scenario::FailoverWait);
    assert_eq!((v.model, v.agrees), ("oversells", true));
    let said = texts(&v.trace);
    let wait = said
        .iter()
        .position(|t| t.contains("WAIT: a replica has the lock"));
    let held = said
        .iter()
        .position(|t| *t == "replication to the replica stops");
    assert!(wait.unwrap() < held.unwrap(), "{said:#?}");
    assert!(said.contains(&"the master dies: its replica is promoted"));
    let early = verdict(Variant::Token, Scenario::FailoverWaitEarly);
    assert_eq!((early.model, early.agrees), ("safe", true));
    // Its witness sells after the failover: nobody is refused forever.
    let said = texts(&early.witness);
    assert!(said.iter().any(|t| t.contains("sells unit")), "{said:#?}");
}

/// The epoch check: a buyer in its business work lives through Redis's
/// outage, and its write meets the reset SKU's new epoch and is refused.
#[test]
fn a_write_whose_read_came_before_the_reset_is_refused() {
    let v = verdict(Variant::Token, Scenario::RedisRestart);
    assert_eq!((v.model, v.agrees), ("recovers", true));
    let without = Mutation {
        no_epoch_check: true,
        ..Mutation::default()
    };
    let broken = check_mutated(
        Variant::Token,
        Scenario::RedisRestart,
        &Limits::default(),
        without,
    )
    .unwrap();
    assert_eq!(broken.model, "oversells");
    let said = texts(&broken.trace);
    let back = said
        .iter()
        .position(|t| t.starts_with("Redis comes back"))
        .unwrap();
    let read = said.iter().position(|t| t.contains("reads stock")).unwrap();
    assert!(
        read < back,
        "the stale read comes before the reset: {said:#?}"
    );
}

/// fenced's token comes with its grant, in one step, as the acquire script
/// takes it: no step takes a token apart from the lock.
#[test]
fn the_fencing_token_comes_with_the_grant() {
    let v = verdict(Variant::Fenced, Scenario::PauseHolder);
    let said = texts(&v.witness);
    assert!(
        said.iter()
            .any(|t| t.ends_with("takes the lock with fencing token 1")),
        "{said:#?}"
    );
    assert!(
        !said.iter().any(|t| t.contains("takes fencing token")),
        "{said:#?}"
    );
}

/// No verdict is a default: with nothing found, a cell is vacuous; `frees`
/// needs its own witness, not merely no deadlock; `keeps selling` needs the
/// whole stock sold.
#[test]
fn a_verdict_with_no_schedule_behind_it_is_vacuous() {
    let token = Protocol::of(Variant::Token);
    let crash = bounds(Scenario::CrashAfterAcquire, token);
    let nothing = |_: Property| None::<&()>;
    assert!(conclude(crash, token, nothing).is_none());
    let sells_only = |p: Property| (p == Property::Sells).then_some(&());
    assert!(
        conclude(crash, token, sells_only).is_none(),
        "frees from a sale alone"
    );
    let redlock = Protocol::of(Variant::Redlock);
    let minority = bounds(Scenario::RedlockMinorityDown, redlock);
    assert!(
        conclude(minority, redlock, sells_only).is_none(),
        "keeps selling from one sale"
    );
    let v = verdict(Variant::Redlock, Scenario::RedlockMinorityDown);
    assert_eq!(v.witnessed, Some(Property::SellsAll));
    let sales = v.witness.iter().filter(|s| s.text.contains("sells unit"));
    assert_eq!(sales.count(), usize::from(v.bounds.stock));
    // Busy rests on a sale once the nodes are back, nothing sold before.
    let busy = verdict(Variant::Redlock, Scenario::RedlockMajorityDown);
    assert_eq!(
        (busy.model, busy.witnessed),
        ("busy", Some(Property::Sells))
    );
    let back = busy
        .witness
        .iter()
        .position(|s| s.text.contains("comes back"));
    let sold = busy
        .witness
        .iter()
        .position(|s| s.text.contains("sells unit"));
    assert!(back.unwrap() < sold.unwrap(), "{:#?}", busy.witness);
    // Every cell of the matrix rests on a schedule.
    for (variant, scenario) in cells() {
        let v = verdict(variant, scenario);
        assert!(
            v.schedule().is_some_and(|(_, s)| !s.is_empty()),
            "{variant} {scenario}"
        );
    }
}

/// The claim's deadline: a retry takes over a claim that stood a lease, and
/// the first attempt's write is refused (its id sold once, by the retry).
#[test]
fn a_retry_takes_over_an_expired_claim_and_the_old_write_is_refused() {
    let without = Mutation {
        no_claim_check: true,
        ..Mutation::default()
    };
    let v = check_mutated(
        Variant::Watchdog,
        Scenario::RetryStorm,
        &Limits::default(),
        without,
    );
    let said = texts(&v.as_ref().unwrap().trace).join("\n");
    assert!(
        said.contains("takes over the request id's expired claim"),
        "{said}"
    );
}

/// A sold-out answer is final for its request id, as the code keeps it.
#[test]
fn a_sold_out_answer_is_final_for_its_id() {
    let sale = Sale {
        protocol: Protocol::of(Variant::Token),
        bounds: bounds(Scenario::RetryStorm, Protocol::of(Variant::Token)),
        mutation: Mutation::default(),
        property: Property::OneSale,
    };
    let mut w = sale.initial();
    w.stock = 0;
    w.request = Request::Pending(0, 0);
    w.buyers[0].pc = token::Pc::Read.into();
    let w = sale.next(&w, Action::Step(0)).unwrap();
    assert_eq!(w.request, Request::Final);
}

/// Bounds from the command line reach every cell, and each line says its
/// verdict holds within bounds.
#[test]
fn bounds_can_be_set_and_every_line_names_them() {
    let limits = Limits {
        buyers: Some(2),
        stock: Some(1),
        lease: Some(3),
    };
    let v = check_within(Variant::Token, Scenario::Race, &limits).unwrap();
    assert_eq!((v.bounds.buyers, v.bounds.stock, v.bounds.lease), (2, 1, 3));
    assert!(v.summary().contains("within bounds"), "{}", v.summary());
    let table = report::table(&[v]);
    assert!(table.contains("no violation within bounds"), "{table}");
    assert!(
        table.contains("race: 2 buyers, stock 1, lease 3"),
        "{table}"
    );
}
