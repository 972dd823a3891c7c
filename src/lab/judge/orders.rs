//! Judge of the order pipeline's scenarios (`crash-before-enqueue`,
//! `worker-crash-before-ack`, `postgres-restart`, `reservation-expiry`):
//! the reconciliation of the ledger with the orders is the truth, the way
//! the ledger is for the stock.
//!
//! The books fail two ways, the two the articles' readers fear:
//! - **oversells**: more promised than stock backs: an order no sale backs
//!   (phantom), a unit with two live orders, a unit given back while its
//!   order stands, or given back twice, stock that appeared;
//! - **loses units**: stock that can no longer be sold: a sale with no
//!   order ever to come, an expired reservation whose unit never went
//!   back, stock that vanished (少卖).

use super::{Check, Judgement, Observed};
use crate::orders::reconcile::Reconciliation;
use crate::variants::Behaviour;

/// What an order cell saw, once its pipeline settled (or gave up).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Books {
    /// What the fault was and how it struck, for people.
    pub fault: String,
    /// Whether the fault landed where it matters (the instance died, the
    /// database was down while buyers bought, the deadline passed, ...).
    pub landed: Check,
    /// The unit the fault struck, when it struck one sale: the only unit
    /// it may lose (another lost unit is not this fault's doing).
    pub struck: Option<i64>,
    /// The reconciliation after the cell.
    pub books: Reconciliation,
    /// Whether the pipeline settled: no message left on its way, none
    /// delivered and never acked.
    pub settled: Check,
    /// Answers other than 200 given to buyers while the fault lasted.
    pub refused: Vec<String>,
    /// Units a second expiry pass gave back (each must go back once).
    pub returned_again: u64,
    /// The facts that make clean books mean the fault was survived (paid
    /// orders still paid, every sale an order, ...).
    pub earned: Check,
}

impl Books {
    /// The orders of every status.
    fn orders(&self) -> i64 {
        let b = &self.books;
        b.pending_payment + b.paid + b.expired
    }
}

/// Every order scenario: landed, then the books (oversells, then loses
/// units), then the buyers' answers, then settling, then the evidence
/// that clean books were earned.
pub fn books(c: &Books) -> Judgement {
    let b = &c.books;
    let evidence = format!(
        "{}; books: {}; sold {}, orders {} ({} paid, {} pending, {} expired), returned {}, stock {} of {}",
        c.fault,
        b.verdict(),
        b.sold,
        c.orders(),
        b.paid,
        b.pending_payment,
        b.expired,
        b.returned,
        b.stock,
        b.initial
    );
    if let Err(why) = &c.landed {
        return Judgement::inconclusive(why, evidence);
    }
    let promised_twice = !b.phantom.is_empty()
        || !b.ordered_twice.is_empty()
        || !b.returned_unexpired.is_empty()
        || b.stock_drift > 0
        || c.returned_again > 0;
    if promised_twice {
        let again = match c.returned_again {
            0 => String::new(),
            n => format!("; a second expiry pass gave back {n} more"),
        };
        return Judgement::seen(Behaviour::Oversells, format!("{evidence}{again}"));
    }
    if !b.lost.is_empty() || !b.unreturned.is_empty() || b.stock_drift < 0 {
        let others: Vec<i64> = b
            .lost
            .iter()
            .copied()
            .filter(|&unit| Some(unit) != c.struck)
            .collect();
        if c.struck.is_some() && !others.is_empty() {
            return Judgement::inconclusive(
                &format!("units the fault did not strike were lost ({others:?})"),
                evidence,
            );
        }
        return Judgement::seen(Behaviour::LosesUnits, evidence);
    }
    if !c.refused.is_empty() {
        return Judgement::seen(
            Behaviour::Busy,
            format!(
                "{evidence}; buyers refused while the fault lasted: {}",
                c.refused.join(", ")
            ),
        );
    }
    if let Err(why) = &c.settled {
        return Judgement::new(
            Observed::Stuck,
            format!("{evidence}; the pipeline never settled: {why}"),
        );
    }
    let earned = c.earned.clone().and_then(|()| {
        super::check(c.orders() == b.sold, || {
            format!("{} orders for {} sales", c.orders(), b.sold)
        })
    });
    match earned {
        Ok(()) => Judgement::seen(Behaviour::Safe, evidence),
        Err(why) => Judgement::inconclusive(&format!("clean books, but {why}"), evidence),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Five sold, five pending orders, nothing wrong.
    fn clean() -> Books {
        Books {
            fault: "instance a crashed".to_owned(),
            landed: Ok(()),
            struck: Some(8),
            books: Reconciliation {
                initial: 10,
                sold: 5,
                stock: 5,
                pending_payment: 5,
                ..Reconciliation::default()
            },
            settled: Ok(()),
            refused: Vec::new(),
            returned_again: 0,
            earned: Ok(()),
        }
    }

    fn observed(c: &Books) -> Observed {
        books(c).observed
    }

    #[test]
    fn clean_books_are_safe_only_when_every_sale_is_an_order() {
        assert_eq!(observed(&clean()), Observed::Seen(Behaviour::Safe));
        let mut short = clean();
        short.books.pending_payment = 4;
        assert_eq!(observed(&short), Observed::Inconclusive);
        let missed = Books {
            landed: Err("the instance did not die".to_owned()),
            ..clean()
        };
        assert_eq!(observed(&missed), Observed::Inconclusive);
    }

    #[test]
    fn the_struck_unit_lost_loses_units_another_is_inconclusive() {
        let mut lost = clean();
        lost.books.lost = vec![8];
        lost.books.pending_payment = 4;
        let judged = books(&lost);
        assert_eq!(judged.observed, Observed::Seen(Behaviour::LosesUnits));
        assert!(
            judged
                .evidence
                .contains("1 lost (sold, no order) (units 8)")
        );
        lost.books.lost = vec![7, 8];
        assert_eq!(observed(&lost), Observed::Inconclusive);
        let mut unreturned = clean();
        unreturned.struck = None;
        unreturned.books.unreturned = vec![6];
        assert_eq!(observed(&unreturned), Observed::Seen(Behaviour::LosesUnits));
    }

    #[test]
    fn a_unit_ordered_or_returned_twice_oversells() {
        let mut twice = clean();
        twice.books.ordered_twice = vec![9];
        assert_eq!(observed(&twice), Observed::Seen(Behaviour::Oversells));
        let again = Books {
            returned_again: 1,
            ..clean()
        };
        assert_eq!(observed(&again), Observed::Seen(Behaviour::Oversells));
        let mut drift = clean();
        drift.books.stock_drift = 1;
        assert_eq!(observed(&drift), Observed::Seen(Behaviour::Oversells));
    }

    #[test]
    fn refused_buyers_are_busy_and_an_unsettled_pipeline_is_stuck() {
        let refused = Books {
            refused: vec!["503 database_unavailable".to_owned()],
            ..clean()
        };
        assert_eq!(observed(&refused), Observed::Seen(Behaviour::Busy));
        let stuck = Books {
            settled: Err("2 messages still on their way".to_owned()),
            ..clean()
        };
        assert_eq!(observed(&stuck), Observed::Stuck);
    }
}
