//! The checker against hand-made histories (each verdict of the spec, each
//! shortcut's edge) and against simulated ones: clients of a real atomic
//! stock, whose histories are linearizable by construction, and the same
//! histories with one answer falsified, which are not.

use std::time::Duration;

use super::judge::{Verdict, decide};
use super::op::{Op, Outcome, SkuHistory, parse};

/// `(client, id, call, ret, outcome, unit-or-remaining)`.
type Row<'a> = (u64, Option<&'a str>, u64, Option<u64>, Outcome, u32);

/// Rows as a history.
fn history(initial: u32, ops: &[Row<'_>]) -> SkuHistory {
    let ops: Vec<Op> = ops
        .iter()
        .map(|&(client, id, call, ret, outcome, n)| Op {
            sku: "a".into(),
            client,
            id: id.map(str::to_owned),
            call,
            ret,
            outcome,
            unit: matches!(outcome, Outcome::Sold | Outcome::Returned).then_some(n),
            remaining: (outcome == Outcome::Read).then_some(n),
            note: None,
        })
        .collect();
    SkuHistory {
        sku: "a".into(),
        initial,
        lines: (2..ops.len() + 2).collect(),
        ops,
    }
}

fn verdict(h: &SkuHistory) -> Verdict {
    decide(h, Duration::from_secs(60)).verdict
}

use Outcome::{Busy, Read, Returned, Sold, SoldOut, Unknown};

#[test]
fn sales_then_sold_out_are_linearizable() {
    let h = history(
        2,
        &[
            (1, None, 0, Some(10), Sold, 2),
            (2, None, 5, Some(15), Sold, 1),
            (3, None, 12, Some(20), SoldOut, 0),
            (4, None, 1, Some(2), Busy, 0),
            (0, None, 30, Some(31), Read, 0),
        ],
    );
    assert_eq!(verdict(&h), Verdict::Linearizable);
}

#[test]
fn a_unit_sold_twice_is_unsafe_and_named() {
    let h = history(
        3,
        &[
            (1, None, 0, Some(10), Sold, 3),
            (2, None, 0, Some(10), Sold, 3),
            (3, None, 20, Some(30), Sold, 2),
        ],
    );
    let d = decide(&h, Duration::from_secs(5));
    assert_eq!(d.verdict, Verdict::Unsafe);
    assert!(d.why.contains("unit 3 was sold 2 times"), "{}", d.why);
    assert_eq!(d.lines, vec![2, 3]);
}

#[test]
fn a_unit_never_stocked_is_unsafe() {
    let h = history(1, &[(1, None, 0, Some(10), Sold, 2)]);
    assert_eq!(verdict(&h), Verdict::Unsafe);
}

/// A store that decrements past zero answers a unit below the first: the
/// recorder writes it as unit 0, which the file accepts as a finding and
/// the checker finds sold though no stock held it; a returned unit 0 is
/// bad input.
#[test]
fn a_unit_below_the_stock_is_read_and_unsafe() {
    let text = r#"{"sku":"x","initial":1}
{"sku":"x","client":1,"call":100,"ret":250,"outcome":"sold","unit":1}
{"sku":"x","client":2,"call":300,"ret":400,"outcome":"sold","unit":0}
"#;
    let skus = parse(text).unwrap();
    let d = decide(&skus[0], Duration::from_secs(60));
    assert_eq!(d.verdict, Verdict::Unsafe);
    assert!(d.why.contains("unit 0 was sold"), "{}", d.why);
    let returned = text.replace("\"sold\",\"unit\":0", "\"returned\",\"unit\":0");
    assert!(parse(&returned).is_err());
    assert_eq!(
        super::Told::from_answer(200, false, Some(-3)),
        super::Told::Sold(0)
    );
}

#[test]
fn sold_out_before_a_later_sale_is_a_lie_not_an_oversale() {
    // Told "sold out" and answered before the last unit was even asked for.
    let h = history(
        1,
        &[
            (1, None, 0, Some(10), SoldOut, 0),
            (2, None, 20, Some(30), Sold, 1),
        ],
    );
    let d = decide(&h, Duration::from_secs(5));
    assert_eq!(d.verdict, Verdict::NotLinearizable);
    // Nobody could have taken the unit before it was answered: that
    // answer alone cannot be ordered.
    assert_eq!(d.lines, vec![2], "{}", d.why);
    assert_eq!(d.impossible_at, Some(10));
}

#[test]
fn an_unknown_attempt_may_have_taken_the_last_unit() {
    let ops = [
        (1, None, 0, Some(10), Sold, 2),
        (2, None, 5, None, Unknown, 0),
        (3, None, 20, Some(30), SoldOut, 0),
    ];
    assert_eq!(verdict(&history(2, &ops)), Verdict::Linearizable);
    // Without it, unit 1 was still there.
    assert_eq!(
        verdict(&history(2, &[ops[0], ops[2]])),
        Verdict::NotLinearizable
    );
    // Called after the "sold out" was answered, it explains nothing.
    let late = (2, None, 31, None, Unknown, 0);
    assert_eq!(
        verdict(&history(2, &[ops[0], late, ops[2]])),
        Verdict::NotLinearizable
    );
}

#[test]
fn books_that_disagree_with_the_answers_are_unsafe() {
    let h = history(
        2,
        &[
            (1, None, 0, Some(10), Sold, 2),
            (0, None, 20, Some(21), Read, 2),
        ],
    );
    assert_eq!(verdict(&h), Verdict::Unsafe);
    // A reading during the sale may see either side of it.
    let h = history(
        2,
        &[
            (1, None, 0, Some(10), Sold, 2),
            (0, None, 5, Some(6), Read, 2),
            (0, None, 20, Some(21), Read, 1),
        ],
    );
    assert_eq!(verdict(&h), Verdict::Linearizable);
}

#[test]
fn a_returned_unit_may_be_sold_again() {
    let sell_twice = [
        (1, None, 0, Some(10), Sold, 1),
        (2, None, 40, Some(50), Sold, 1),
    ];
    assert_eq!(verdict(&history(1, &sell_twice)), Verdict::Unsafe);
    let h = history(
        1,
        &[
            sell_twice[0],
            (0, None, 20, Some(30), Returned, 1),
            sell_twice[1],
        ],
    );
    assert_eq!(verdict(&h), Verdict::Linearizable);
}

#[test]
fn a_request_id_takes_effect_once_and_answers_one_thing() {
    // The first attempt's answer was lost; the retry learns unit 1 sold:
    // one sale, not two.
    let h = history(
        1,
        &[
            (1, Some("r"), 0, None, Unknown, 0),
            (1, Some("r"), 50, Some(60), Sold, 1),
            (2, None, 70, Some(80), SoldOut, 0),
        ],
    );
    assert_eq!(verdict(&h), Verdict::Linearizable);
    // A retry told "sold out" after its first attempt sold.
    let h = history(
        2,
        &[
            (1, Some("r"), 0, Some(10), Sold, 2),
            (1, Some("r"), 50, Some(60), SoldOut, 0),
        ],
    );
    let d = decide(&h, Duration::from_secs(5));
    assert_eq!(d.verdict, Verdict::Unsafe);
    assert!(d.why.contains("request id \"r\""), "{}", d.why);
    // The sale happened within the first attempt's window, which ended
    // before the other buyer's "sold out" began: no order.
    let h = history(
        1,
        &[
            (1, Some("r"), 0, Some(10), Busy, 0),
            (1, Some("r"), 30, Some(40), Sold, 1),
            (2, None, 15, Some(20), SoldOut, 0),
        ],
    );
    assert_eq!(verdict(&h), Verdict::NotLinearizable);
}

#[test]
fn a_sold_out_id_took_nothing_even_when_sold_out_says_nothing() {
    // Stock 1 and two sales: the id answered "sold out" cannot be the one
    // whose lost first attempt took the unit.
    let h = history(
        1,
        &[
            (1, Some("r"), 0, None, Unknown, 0),
            (1, Some("r"), 5, Some(8), SoldOut, 0),
            (2, None, 10, Some(20), Sold, 1),
            (0, None, 30, Some(31), Read, 1),
        ],
    );
    assert_eq!(verdict(&h), Verdict::Unsafe);
}

#[test]
fn the_file_format_round_trips_through_the_checker() {
    let text = r#"{"sku":"x","initial":1}
{"sku":"x","client":1,"id":"r1","call":100,"ret":250,"outcome":"sold","unit":1}
{"sku":"x","client":2,"call":300,"ret":400,"outcome":"sold_out"}
"#;
    let skus = parse(text).unwrap();
    assert_eq!(verdict(&skus[0]), Verdict::Linearizable);
}

/// A stock that is really atomic, its clients' answers as they were told:
/// each operation takes effect at one instant between its call and return.
fn simulated(
    seed: u64,
    clients: u64,
    per_client: u64,
    initial: u32,
    unknown_every: u64,
) -> SkuHistory {
    simulated_reading(seed, clients, per_client, initial, unknown_every, true)
}

fn simulated_reading(
    seed: u64,
    clients: u64,
    per_client: u64,
    initial: u32,
    unknown_every: u64,
    read_at_end: bool,
) -> SkuHistory {
    let mut rng = fastrand::Rng::with_seed(seed);
    // (moment of effect, client, call, ret, knows its answer)
    let mut planned = Vec::new();
    for client in 1..=clients {
        let mut t = rng.u64(0..1_000);
        for k in 0..per_client {
            let call = t;
            let at = call + rng.u64(1..2_000);
            let ret = at + rng.u64(1..2_000);
            let lost = unknown_every > 0 && (client * 7919 + k).is_multiple_of(unknown_every);
            planned.push((at, client, call, ret, !lost));
            t = ret + rng.u64(1..500);
        }
    }
    planned.sort_unstable();
    let end = planned.iter().map(|p| p.3).max().unwrap_or(0);
    let mut left = initial;
    let mut ops = Vec::new();
    for (_, client, call, ret, answered) in planned {
        let (outcome, unit) = if left > 0 {
            left -= 1;
            (Sold, left + 1)
        } else {
            (SoldOut, 0)
        };
        let (outcome, ret) = if answered {
            (outcome, Some(ret))
        } else {
            (Unknown, None)
        };
        ops.push((client, None, call, ret, outcome, unit));
    }
    ops.sort_by_key(|op| op.2);
    if read_at_end {
        ops.push((0, None, end + 1, Some(end + 2), Read, left));
    }
    history(initial, &ops)
}

#[test]
fn histories_of_a_real_atomic_stock_are_linearizable() {
    for seed in 0..40 {
        let h = simulated(seed, 1 + seed % 8, 12, (seed % 30) as u32, seed % 5);
        let d = decide(&h, Duration::from_secs(60));
        assert_eq!(d.verdict, Verdict::Linearizable, "seed {seed}: {}", d.why);
    }
}

#[test]
fn one_falsified_answer_is_found_and_shown_small() {
    for seed in 0..20 {
        // The earliest sale becomes "sold out": stock remained then.
        let mut h = simulated_reading(seed, 6, 15, 20, 0, false);
        let first = (0..h.ops.len())
            .find(|&i| h.ops[i].outcome == Sold)
            .unwrap();
        h.ops[first].outcome = SoldOut;
        h.ops[first].unit = None;
        let d = decide(&h, Duration::from_secs(60));
        assert_eq!(
            d.verdict,
            Verdict::NotLinearizable,
            "seed {seed}: {}",
            d.why
        );
        assert!(d.lines.contains(&h.lines[first]), "seed {seed}: {}", d.why);
        assert!(
            d.lines.len() <= 4,
            "seed {seed}: {} operations: {}",
            d.lines.len(),
            d.why
        );
        // With the books read at the end, the unit it did not sell is
        // missing from them: whatever "sold out" means, no order exists.
        let mut h = simulated(seed, 6, 15, 20, 0);
        h.ops[first].outcome = SoldOut;
        h.ops[first].unit = None;
        let d = decide(&h, Duration::from_secs(60));
        assert_eq!(d.verdict, Verdict::Unsafe, "seed {seed}: {}", d.why);
        // The last sale answered with the unit of another: sold twice.
        let mut h = simulated(seed, 6, 15, 20, 0);
        let sales: Vec<usize> = (0..h.ops.len())
            .filter(|&i| h.ops[i].outcome == Sold)
            .collect();
        let (a, b) = (sales[0], sales[sales.len() - 1]);
        h.ops[b].unit = h.ops[a].unit;
        let d = decide(&h, Duration::from_secs(60));
        assert_eq!(d.verdict, Verdict::Unsafe, "seed {seed}: {}", d.why);
        assert_eq!(
            d.lines,
            vec![h.lines[a], h.lines[b]],
            "seed {seed}: {}",
            d.why
        );
    }
}

#[test]
fn a_large_history_of_one_sku_is_decided() {
    // 64 clients, 20 000 operations, one SKU: the issue's size.
    let h = simulated(7, 64, 20_000 / 64, 5_000, 97);
    assert!(h.ops.len() >= 19_900);
    let d = decide(&h, Duration::from_secs(120));
    assert_eq!(d.verdict, Verdict::Linearizable, "{}", d.why);
}

#[test]
fn a_lie_in_a_large_crowded_history_is_found() {
    // 64 clients, about 6 400 operations; in the middle, a buyer is told
    // "sold out" while half the stock remains.
    let mut h = simulated_reading(11, 64, 100, 5_000, 0, false);
    let sales: Vec<usize> = (0..h.ops.len())
        .filter(|&i| h.ops[i].outcome == Sold)
        .collect();
    let lie = sales[sales.len() / 2];
    h.ops[lie].outcome = SoldOut;
    h.ops[lie].unit = None;
    let d = decide(&h, Duration::from_secs(120));
    assert_eq!(d.verdict, Verdict::NotLinearizable, "{}", d.why);
    assert!(d.lines.contains(&h.lines[lie]), "{}", d.why);
}
