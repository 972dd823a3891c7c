//! What `stocklock reconcile` found for one SKU ([`Reconciliation`], the
//! same shape in `GET /api/orders`, in `reconcile --json` and in the lab's
//! evidence) and its verdict in one line: `clean: ...`, what is
//! wrong with the current epoch, or `LEDGER_LOST: ...` when some orders
//! name an epoch the ledger never opened (Redis lost its data).

use serde::{Deserialize, Serialize};

use super::Said;
use crate::said;

/// The books of one SKU, compared.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reconciliation {
    pub sku: String,
    pub epoch: i64,
    /// The ledger: stock set by the reset, sales, units given back, stock left.
    pub initial: i64,
    pub sold: i64,
    pub returned: i64,
    pub stock: i64,
    /// Orders of this epoch by status.
    pub pending_payment: i64,
    pub paid: i64,
    pub expired: i64,
    /// Messages on their way: on the stream, not yet acked by a worker.
    pub in_flight: i64,
    pub lost: Vec<i64>,
    pub phantom: Vec<i64>,
    pub ordered_twice: Vec<i64>,
    pub unreturned: Vec<i64>,
    pub returned_unexpired: Vec<i64>,
    /// `stock - (initial - sold + returned)`.
    pub stock_drift: i64,
    /// Orders of epochs the ledger does not know (`LEDGER_LOST`), and those epochs.
    #[serde(default)]
    pub orphaned: i64,
    #[serde(default)]
    pub orphaned_epochs: Vec<i64>,
    /// The ledger lost its history: some orders name an epoch it never opened.
    #[serde(default)]
    pub ledger_lost: bool,
    /// Inserts the workers were refused by another order's identity (each
    /// retried, its message kept): a sign of trouble, not a wrong book by
    /// itself (a message still refused shows as lost or on its way).
    #[serde(default)]
    pub order_conflicts: i64,
}

impl Reconciliation {
    /// Everything matches, and nothing is on its way.
    pub fn clean(&self) -> bool {
        self.matches() && self.in_flight == 0
    }

    /// Nothing is wrong (messages may still be on their way).
    pub fn matches(&self) -> bool {
        !self.ledger_lost && self.matches_epoch()
    }

    /// The current epoch's books match (whatever became of older ones).
    fn matches_epoch(&self) -> bool {
        self.lost.is_empty()
            && self.phantom.is_empty()
            && self.ordered_twice.is_empty()
            && self.unreturned.is_empty()
            && self.returned_unexpired.is_empty()
            && self.stock_drift == 0
    }

    /// One line: the verdict; `LEDGER_LOST: ...` first when the ledger lost
    /// its history, followed by what the current epoch shows.
    pub fn verdict(&self) -> String {
        self.verdict_said().en
    }

    /// [`Reconciliation::verdict`] in both languages (`LEDGER_LOST` is
    /// the same in both).
    pub fn verdict_said(&self) -> Said {
        let epoch = self.epoch_verdict();
        if !self.ledger_lost {
            return epoch;
        }
        let (orphaned, epochs) = (self.orphaned, self.orphaned_epochs.len());
        let list = shown_list(&self.orphaned_epochs);
        Said {
            en: format!(
                "LEDGER_LOST: orphaned epochs: {orphaned} orders (of {epochs} epochs the ledger never opened: {}); this epoch: {}",
                list.en, epoch.en
            ),
            zh: format!(
                "LEDGER_LOST:孤立的纪元:{orphaned} 个订单(属于账本从未开启过的 {epochs} 个纪元:{});本纪元:{}",
                list.zh, epoch.zh
            ),
        }
    }

    /// The verdict on the current epoch alone.
    fn epoch_verdict(&self) -> Said {
        let refused = if self.order_conflicts > 0 {
            let conflicts = self.order_conflicts;
            said!(
                "; {conflicts} order inserts refused by a conflict (retried)",
                ";{conflicts} 次订单插入因冲突被拒绝(已重试)"
            )
        } else {
            Said::default()
        };
        let (sold, paid, pending, expired) =
            (self.sold, self.paid, self.pending_payment, self.expired);
        if self.matches_epoch() && self.in_flight == 0 {
            let (orders, returned) = (pending + paid + expired, self.returned);
            let clean = said!(
                "clean: {sold} sold, {orders} orders ({paid} paid, {pending} pending, {expired} expired), {returned} returned",
                "账目一致:卖出 {sold},订单 {orders} 个(已支付 {paid},待支付 {pending},已过期 {expired}),退回 {returned}"
            );
            return clean.then(&Said::default(), &refused);
        }
        let mut wrong = Vec::new();
        let mut list = |what: Said, units: &[i64]| {
            if !units.is_empty() {
                let (n, units) = (units.len(), shown(units));
                wrong.push(Said {
                    en: format!("{n} {} {}", what.en, units.en),
                    zh: format!("{n} 件{}{}", what.zh, units.zh),
                });
            }
        };
        list(
            said!("lost (sold, no order)", "丢失(已卖出,没有订单)"),
            &self.lost,
        );
        list(
            said!("phantom (order, no sale)", "幻影(有订单,没有销售)"),
            &self.phantom,
        );
        list(said!("ordered twice", "下了两次订单"), &self.ordered_twice);
        list(
            said!("expired, never returned", "已过期,从未退回"),
            &self.unreturned,
        );
        list(
            said!("returned, not expired", "已退回,却未过期"),
            &self.returned_unexpired,
        );
        if self.stock_drift != 0 {
            let (drift, stock) = (self.stock_drift, self.stock);
            let expected = self.initial - self.sold + self.returned;
            wrong.push(said!(
                "stock drift {drift:+} (stock {stock}, expected {expected})",
                "库存偏差 {drift:+}(库存 {stock},应为 {expected})"
            ));
        }
        if self.in_flight > 0 {
            let in_flight = self.in_flight;
            wrong.push(said!(
                "{in_flight} messages still on their way",
                "{in_flight} 条消息仍在途中"
            ));
        }
        Said::join(&wrong, &said!("; ", ";")).then(&Said::default(), &refused)
    }
}

/// A few units, then how many more.
fn shown(units: &[i64]) -> Said {
    let (head, more) = head(units);
    Said {
        en: format!("(units {})", shown_list(units).en),
        zh: match more {
            0 => format!("(第 {} 件)", head.join("、")),
            more => format!("(第 {} 件,以及另外 {more} 件)", head.join("、")),
        },
    }
}

/// A few numbers, then how many more.
fn shown_list(numbers: &[i64]) -> Said {
    let (head, more) = head(numbers);
    let (en, zh) = (head.join(", "), head.join("、"));
    if more > 0 {
        said!("{en}, and {more} more", "{zh},以及另外 {more} 个")
    } else {
        Said { en, zh }
    }
}

/// The first few numbers, and how many more there are.
fn head(numbers: &[i64]) -> (Vec<String>, usize) {
    let head = numbers.iter().take(8).map(i64::to_string).collect();
    (head, numbers.len().saturating_sub(8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_names_what_is_wrong() {
        let mut r = Reconciliation {
            sold: 3,
            initial: 3,
            ..Default::default()
        };
        r.pending_payment = 3;
        assert!(r.clean(), "{}", r.verdict());
        r.lost = vec![2];
        r.stock_drift = 1;
        r.stock = 1;
        assert!(!r.matches());
        assert_eq!(
            r.verdict(),
            "1 lost (sold, no order) (units 2); stock drift +1 (stock 1, expected 0)"
        );
    }

    #[test]
    fn a_ledger_that_lost_its_history_is_never_clean() {
        let mut r = Reconciliation {
            sold: 5,
            initial: 10,
            stock: 5,
            pending_payment: 5,
            ..Default::default()
        };
        assert!(r.clean(), "{}", r.verdict());
        r.orphaned = 5;
        r.orphaned_epochs = vec![1_764_000_000_000_000];
        r.ledger_lost = true;
        assert!(!r.clean() && !r.matches());
        assert_eq!(
            r.verdict(),
            "LEDGER_LOST: orphaned epochs: 5 orders (of 1 epochs the ledger never opened: \
             1764000000000000); this epoch: clean: 5 sold, 5 orders (0 paid, 5 pending, 0 expired), 0 returned"
        );
        assert_eq!(
            r.verdict_said().zh,
            "LEDGER_LOST:孤立的纪元:5 个订单(属于账本从未开启过的 1 个纪元:1764000000000000);\
             本纪元:账目一致:卖出 5,订单 5 个(已支付 0,待支付 5,已过期 0),退回 0"
        );
    }
}
