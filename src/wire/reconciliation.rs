//! What `stocklock reconcile` found for one SKU ([`Reconciliation`], the
//! same shape in `GET /api/orders`, in `reconcile --json` and in the lab's
//! evidence) and its verdict in one line: `clean: ...`, what is
//! wrong with the current epoch, or `LEDGER_LOST: ...` when some orders
//! name an epoch the ledger never opened (Redis lost its data).

use serde::{Deserialize, Serialize};

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
        if !self.ledger_lost {
            return self.epoch_verdict();
        }
        format!(
            "LEDGER_LOST: orphaned epochs: {} orders (of {} epochs the ledger never opened: {}); this epoch: {}",
            self.orphaned,
            self.orphaned_epochs.len(),
            shown_list(&self.orphaned_epochs),
            self.epoch_verdict()
        )
    }

    /// The verdict on the current epoch alone.
    fn epoch_verdict(&self) -> String {
        let refused = if self.order_conflicts > 0 {
            format!(
                "; {} order inserts refused by a conflict (retried)",
                self.order_conflicts
            )
        } else {
            String::new()
        };
        if self.matches_epoch() && self.in_flight == 0 {
            return format!(
                "clean: {} sold, {} orders ({} paid, {} pending, {} expired), {} returned{refused}",
                self.sold,
                self.pending_payment + self.paid + self.expired,
                self.paid,
                self.pending_payment,
                self.expired,
                self.returned
            );
        }
        let mut wrong = Vec::new();
        let mut list = |what: &str, units: &[i64]| {
            if !units.is_empty() {
                wrong.push(format!("{} {what} {}", units.len(), shown(units)));
            }
        };
        list("lost (sold, no order)", &self.lost);
        list("phantom (order, no sale)", &self.phantom);
        list("ordered twice", &self.ordered_twice);
        list("expired, never returned", &self.unreturned);
        list("returned, not expired", &self.returned_unexpired);
        if self.stock_drift != 0 {
            wrong.push(format!(
                "stock drift {:+} (stock {}, expected {})",
                self.stock_drift,
                self.stock,
                self.initial - self.sold + self.returned
            ));
        }
        if self.in_flight > 0 {
            wrong.push(format!("{} messages still on their way", self.in_flight));
        }
        wrong.join("; ") + &refused
    }
}

/// A few units, then how many more.
fn shown(units: &[i64]) -> String {
    format!("(units {})", shown_list(units))
}

/// A few numbers, then how many more.
fn shown_list(numbers: &[i64]) -> String {
    let head: Vec<String> = numbers.iter().take(8).map(i64::to_string).collect();
    let more = numbers.len().saturating_sub(8);
    if more > 0 {
        format!("{}, and {more} more", head.join(", "))
    } else {
        head.join(", ")
    }
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
    }
}
