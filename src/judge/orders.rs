//! Judge of the order pipeline's scenarios (`crash-before-enqueue`,
//! `worker-crash-before-ack`, `postgres-restart`, `reservation-expiry`,
//! `redis-data-loss`): the reconciliation of the ledger with the orders is
//! the truth, the way the ledger is for the stock.
//!
//! The books fail two ways, the two the articles' readers fear:
//! - **oversells**: more promised than stock backs: an order no sale backs
//!   (phantom), a unit with two live orders, a unit given back while its
//!   order stands, or given back twice, stock that appeared;
//! - **loses units**: stock that can no longer be sold: a sale with no
//!   order ever to come, an expired reservation whose unit never went
//!   back, stock that vanished (少卖).

use super::{Check, Judgement, Observed, said_of};
use crate::orders::reconcile::Reconciliation;
use crate::said;
use crate::variants::Behaviour;
use crate::wire::Said;

/// What an order cell saw, once its pipeline settled (or gave up).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Books {
    /// What the fault was and how it struck, for people.
    pub fault: Said,
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
    pub refused: Vec<Said>,
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
    let (sold, orders, paid, pending) = (b.sold, c.orders(), b.paid, b.pending_payment);
    let (expired, returned, stock, initial) = (b.expired, b.returned, b.stock, b.initial);
    let evidence = said_of!(
        "{}; books: {}; sold {sold}, orders {orders} ({paid} paid, {pending} pending, {expired} expired), returned {returned}, stock {stock} of {initial}",
        "{};账目:{};卖出 {sold},订单 {orders} 个(已支付 {paid},待支付 {pending},已过期 {expired}),退回 {returned},库存 {stock}/{initial}";
        c.fault,
        b.verdict_said()
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
            0 => Said::default(),
            n => said!(
                "; a second expiry pass gave back {n} more",
                ";第二轮过期处理又退回了 {n} 件"
            ),
        };
        return Judgement::seen(
            Behaviour::Oversells,
            evidence.then(&Said::default(), &again),
        );
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
                &said!(
                    "units the fault did not strike were lost ({others:?})",
                    "故障没有波及的库存也丢失了({others:?})"
                ),
                evidence,
            );
        }
        return Judgement::seen(Behaviour::LosesUnits, evidence);
    }
    if !c.refused.is_empty() {
        return Judgement::seen(
            Behaviour::Busy,
            said_of!(
                "{}; buyers refused while the fault lasted: {}",
                "{};故障期间被拒绝的买家:{}";
                evidence,
                Said::join(&c.refused, &said!(", ", ","))
            ),
        );
    }
    if let Err(why) = &c.settled {
        return Judgement::new(
            Observed::Stuck,
            said_of!(
                "{}; the pipeline never settled: {}",
                "{};订单流水线始终没有稳定下来:{}";
                evidence,
                why
            ),
        );
    }
    let earned = c.earned.clone().and_then(|()| {
        super::check(orders == sold, || {
            said!(
                "{orders} orders for {sold} sales",
                "{sold} 笔销售对应 {orders} 个订单"
            )
        })
    });
    match earned {
        Ok(()) => Judgement::seen(Behaviour::Safe, evidence),
        Err(why) => Judgement::inconclusive(
            &said_of!("clean books, but {}", "账目干净,但{}"; why),
            evidence,
        ),
    }
}

/// What `redis-data-loss` saw: the books after it (the new epoch's, and
/// the orders of the epoch Redis forgot), and how many sales came when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostLedger {
    pub books: Books,
    /// Orders written before Redis lost its data.
    pub written_before: i64,
    /// Sales answered `sold` whose orders were on their way (PostgreSQL
    /// down) when Redis lost them.
    pub in_flight: i64,
    /// Sales answered `sold` after the reset.
    pub sold_after: i64,
    /// The SKU's orders in PostgreSQL, of every epoch.
    pub orders: i64,
}

/// `redis-data-loss`: the new epoch's books are judged as any order cell's;
/// then every sale answered `sold` must have exactly one order or be
/// reported: the orders written before the loss as orphaned
/// (`LEDGER_LOST`), the in-flight ones, which no order will ever name, by
/// that same verdict (observed: loses units).
pub fn ledger_lost(c: &LostLedger) -> Judgement {
    let b = &c.books.books;
    let (orders, before, in_flight, after) =
        (c.orders, c.written_before, c.in_flight, c.sold_after);
    let answered = before + in_flight + after;
    let evidence = said_of!(
        "{}; books: {}; {orders} orders in PostgreSQL for {answered} sales answered sold ({before} written before the loss, {in_flight} in flight, {after} after the reset)",
        "{};账目:{};应答为已售出的 {answered} 笔销售在 PostgreSQL 里有 {orders} 个订单(丢失之前写入 {before} 个,在途 {in_flight} 个,重置之后 {after} 个)";
        c.books.fault,
        b.verdict_said()
    );
    if let Err(why) = &c.books.landed {
        return Judgement::inconclusive(why, evidence);
    }
    // The new epoch alone, as any cell's books.
    let this_epoch = Books {
        books: Reconciliation {
            ledger_lost: false,
            orphaned: 0,
            orphaned_epochs: Vec::new(),
            ..b.clone()
        },
        ..c.books.clone()
    };
    let judged = books(&this_epoch);
    if judged.observed != Observed::Seen(Behaviour::Safe) {
        return Judgement::new(
            judged.observed,
            said_of!("the new epoch: {}", "新纪元:{}"; judged.evidence),
        );
    }
    let reported = super::check(b.ledger_lost, || {
        said!(
            "reconcile did not report the ledger Redis lost",
            "对账没有报告 Redis 丢失的账本"
        )
    })
    .and_then(|()| {
        super::check(b.orphaned == before, || {
            let orphaned = b.orphaned;
            said!(
                "{orphaned} orphaned orders, not the {before} written before the loss",
                "孤立订单 {orphaned} 个,而不是丢失之前写入的 {before} 个"
            )
        })
    })
    .and_then(|()| {
        super::check(orders == before + after, || {
            said!(
                "a sale with no order or two, or an order no sale made",
                "有销售没有订单或有两个订单,或者有订单不是任何销售产生的"
            )
        })
    });
    match reported {
        Err(why) => Judgement::inconclusive(&why, evidence),
        Ok(()) if c.in_flight > 0 => Judgement::seen(Behaviour::LosesUnits, evidence),
        Ok(()) => Judgement::seen(Behaviour::Safe, evidence),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Five sold, five pending orders, nothing wrong.
    fn clean() -> Books {
        Books {
            fault: said!("instance a crashed", "实例 a 崩溃"),
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
            landed: Err(said!("the instance did not die", "实例没有死掉")),
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
                .en
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
            refused: vec![Said::same("503 database_unavailable")],
            ..clean()
        };
        assert_eq!(observed(&refused), Observed::Seen(Behaviour::Busy));
        let stuck = Books {
            settled: Err(said!("2 messages still on their way", "2 条消息仍在途中")),
            ..clean()
        };
        assert_eq!(observed(&stuck), Observed::Stuck);
    }

    /// `redis-data-loss`: 2 written, 3 in flight, 3 after the reset.
    fn lost_ledger() -> LostLedger {
        let mut books = clean();
        books.struck = None;
        books.books.sold = 3;
        books.books.stock = 7;
        books.books.pending_payment = 3;
        books.books.ledger_lost = true;
        books.books.orphaned = 2;
        books.books.orphaned_epochs = vec![1];
        LostLedger {
            books,
            written_before: 2,
            in_flight: 3,
            sold_after: 3,
            orders: 5,
        }
    }

    #[test]
    fn a_lost_ledger_reported_is_lost_units_and_one_unreported_fails() {
        let seen = ledger_lost(&lost_ledger());
        assert_eq!(
            seen.observed,
            Observed::Seen(Behaviour::LosesUnits),
            "{}",
            seen.evidence
        );
        assert!(
            seen.evidence
                .en
                .contains("LEDGER_LOST: orphaned epochs: 2 orders"),
            "{}",
            seen.evidence
        );
        // Reconcile said clean (the epoch reused, two orders dropped).
        let mut unreported = lost_ledger();
        unreported.books.books.ledger_lost = false;
        unreported.books.books.orphaned = 0;
        unreported.orders = 3;
        let seen = ledger_lost(&unreported);
        assert_eq!(seen.observed, Observed::Inconclusive, "{}", seen.evidence);
        // A sale after the reset without its order is the new epoch's loss.
        let mut lost = lost_ledger();
        lost.books.books.lost = vec![8];
        assert_eq!(
            ledger_lost(&lost).observed,
            Observed::Seen(Behaviour::LosesUnits)
        );
    }
}
