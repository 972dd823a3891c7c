//! After a run of an order variant (`lua-stream`, `lua-then-queue`) on a
//! stack with orders on: wait for the pipeline to write the run's orders,
//! then take the stack's reconciliation of the ledger with them (read now:
//! `load` has the admin token).

use std::time::{Duration, Instant};

use crate::client::StackClient;
use crate::wire::{OrdersCheck, OrdersView};

/// How long the pipeline gets to catch up with the sales.
const SETTLE: Duration = Duration::from_secs(15);

/// The check of `sku` once nothing is in flight (or after a few seconds);
/// `None` when the stack runs without orders.
pub async fn check(client: &StackClient, sku: &str) -> Option<OrdersCheck> {
    let start = Instant::now();
    loop {
        // With the admin token: a reading made now, never the public view's
        // cached one, which could still show messages in flight (or none).
        let view: OrdersView = client.orders(sku).await.ok()?;
        let r = &view.reconciliation;
        if r.in_flight == 0 || start.elapsed() >= SETTLE {
            return Some(OrdersCheck {
                clean: r.clean(),
                orders: r.pending_payment + r.paid + r.expired,
                verdict: view.verdict,
                lag_p50_ms: view.summary.lag_p50_ms,
                lag_p99_ms: view.summary.lag_p99_ms,
                orders_per_s: view.summary.orders_per_s,
            });
        }
        // The workers' pace: nothing to wait on but their progress.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
