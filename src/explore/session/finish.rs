//! The end of a schedule: the ledger's verdict (oversold, a unit answered
//! sold twice, a lock nobody can free, the orders' books, the cell's own
//! claim) and, beside it, the history checker's.

use anyhow::bail;

use super::super::run::pipeline;
use super::super::run::{Buyer, name};
use super::Session;
use crate::variants::Variant;
use crate::wire::Said;

impl Session<'_> {
    /// Ends the schedule (`outcome`: how its steps went) and judges it by
    /// the ledger, the answers and the orders.
    pub async fn finish(
        mut self,
        outcome: anyhow::Result<()>,
    ) -> anyhow::Result<super::super::Schedule> {
        // The cell's own claim, judged by the sales after the schedule
        // (first: the books read below hold those sales too).
        let claim = match &outcome {
            Ok(()) => self.claim_broken().await,
            Err(_) => Ok(None),
        };
        let unskewed = match &self.skewed {
            Some(client) => client.chaos(&self.skew(0)).await.map(|_| ()),
            None => Ok(()),
        };
        let sku = self.setup.sku.clone();
        let stack = self.run.stack;
        let read_at = self.recorder.now();
        let state = stack.client.state(&sku).await;
        // The order pipeline, once it settled (a crashed buyer, a dead worker
        // still held, as good as dead): its books must match.
        let books = self.run.settle_pipeline().await;
        // A lock with no TTL and a dead holder: nobody will ever sell again.
        let ttl = self.run.lock().await;
        let run = &mut self.run;
        let crashed = run.buyers.values().any(|b| matches!(b, Buyer::Crashed(..)));
        // Nobody stays held, the crashed included.
        run.scheduler.abandon().await?;
        unskewed?;
        let (mut sales, mut answered_sold) = (0, 0);
        let (mut answers, mut answered) = (Vec::new(), Vec::new());
        let mut buyers: Vec<(u8, Buyer)> = run.buyers.drain().collect();
        buyers.sort_by_key(|(n, _)| *n);
        if buyers.len() != usize::from(run.count) && outcome.is_ok() {
            bail!(
                "the explorer lost track of a buyer: {} of {} left",
                buyers.len(),
                run.count
            );
        }
        for (n, buyer) in buyers {
            let answer = match buyer {
                Buyer::Sent(request) | Buyer::Waiting(_, request) | Buyer::Crashed(request) => {
                    request.await.ok()
                }
                Buyer::Done(answer) => Some(answer),
            };
            sales += answer.as_ref().is_some_and(|a| a.sold() && !a.replayed()) as usize;
            answered_sold += answer.as_ref().is_some_and(|a| a.sold()) as usize;
            answers.push(format!(
                "{} {}",
                name(n),
                answer.as_ref().map_or("no answer".to_owned(), |a| format!(
                    "{} {}",
                    a.status,
                    a.reason().unwrap_or_default()
                ))
            ));
            answered.extend(answer.map(|a| (n, a)));
        }
        outcome?;
        let claim = claim?;
        // A stack without the variant's store answers every buyer so:
        // such a schedule explored nothing, and must not pass for one.
        if !answered.is_empty()
            && answered
                .iter()
                .all(|(_, a)| a.reason() == Some("not_configured"))
        {
            bail!(
                "this stack cannot sell {}: every buyer was answered so ({}): it lacks the variant's store",
                self.variant,
                answers.join(", ")
            );
        }
        let state = state?;
        self.recorder.read(&sku, read_at, state.remaining);
        let books = books?;
        // Every buyer told `sold` finds its order (a sale whose message Redis
        // lost has none, in whatever epoch).
        let orders = match self.run.pipeline.is_some() {
            true => {
                let id = |n: u8| self.request_id(n);
                pipeline::orders_of(&self.run, &sku, &answered, id).await?
            }
            false => Vec::new(),
        };
        let missing: Vec<String> = (orders.iter())
            .filter(|(_, order)| order.is_none())
            .map(|(n, _)| name(*n))
            .collect();
        // The units of reservations that expired came back to the stock at
        // some moment of the schedule (or as it settled), once each
        // expired order's unit was given back, as the orders' books say.
        if books.as_ref().is_some_and(|b| b.unreturned.is_empty()) {
            let expired =
                (orders.iter()).filter_map(|(_, o)| o.as_ref().filter(|o| o.status == "expired"));
            for order in expired {
                self.recorder.returned(&sku, 0, order.unit);
            }
        }
        let bounds = &self.bounds;
        let unordered = books.as_ref().is_some_and(|b| !b.matches()) || !missing.is_empty();
        // A failover loses the old master's records of its sales: a unit sold
        // twice shows in the answers.
        let twice_told = match bounds.failovers > 0 {
            true => crate::replay::sold_twice(answered.iter().map(|(n, a)| (n, a))),
            false => Vec::new(),
        };
        // And a sale told whose record the new master never had: its unit
        // is back in stock, to be sold again (the books disagree with what
        // a buyer was told, whether or not a second buyer came for it).
        let told_units: std::collections::BTreeSet<i64> = (answered.iter())
            .filter(|(_, a)| a.sold())
            .filter_map(|(_, a)| a.unit())
            .collect();
        let forgotten = match bounds.failovers > 0 {
            true => (told_units.len() as i64 - state.sold).max(0),
            false => 0,
        };
        // (`setnx-expiry`'s key has no TTL either, but its value's time runs out.)
        let stuck = crashed
            && ttl? == Some(-1)
            && self.variant != Variant::SetnxExpiry
            && state.remaining > 0;
        // One purchase retried: it may sell once (its retries replay it).
        let twice = bounds.one_request && sales > 1;
        // Calls cut off: once every buyer told `unknown` asked again, each sale
        // in the ledger is a buyer's answered `sold` (an id sold twice, or a
        // sale no answer owns, breaks it).
        let unowned = bounds.cutoffs > 0 && state.sold != answered_sold as i64;
        let (oversold, duplicates, sold, initial) =
            (state.oversold, state.duplicates, state.sold, state.initial);
        let mut ledger = crate::said!(
            "oversold {oversold}, duplicates {duplicates}, sold {sold} of {initial}",
            "超卖 {oversold},重复 {duplicates},卖出 {sold} / {initial}"
        );
        let mut add = |part: Said| ledger = ledger.clone().then(&crate::said!("; ", ";"), &part);
        if stuck {
            add(crate::said!(
                "stuck: a lock with no TTL, its holder dead, units left",
                "卡住:一把没有 TTL 的锁,持有者已死,库存还有剩余"
            ));
        }
        if twice {
            add(crate::said!(
                "one request id sold {sales} times",
                "同一个请求 id 卖出了 {sales} 次"
            ));
        }
        if unowned {
            let said = answers.join(", ");
            add(crate::said!(
                "{answered_sold} buyers answered sold: {said}",
                "{answered_sold} 个买家被告知买到:{said}"
            ));
        }
        if !twice_told.is_empty() {
            let units = twice_told.join(", ");
            add(crate::said!(
                "units answered sold twice: {units}",
                "被两次告知卖出的件号:{units}"
            ));
        }
        if forgotten > 0 {
            add(crate::said!(
                "{forgotten} sale(s) answered sold that the new master's books do not hold (units told: {told_units:?})",
                "{forgotten} 笔被告知卖出的销售不在新主节点的账上(告知的件号:{told_units:?})"
            ));
        }
        if let Some(broken) = &claim {
            let (en, zh) = (&broken.en, &broken.zh);
            add(crate::said!("claim {en}", "结论 {zh}"));
        }
        if let Some(b) = &books {
            let verdict = b.verdict();
            add(crate::said!(
                "orders: {verdict}; buyers sold with no order: {missing:?}",
                "订单:{verdict};买到却没有订单的买家:{missing:?}"
            ));
        }
        let oversold = state.oversold > 0
            || state.duplicates > 0
            || twice
            || !twice_told.is_empty()
            || forgotten > 0;
        let (history, disagreement) =
            super::super::second::opinion(&self.recorder, (oversold, self.undersells));
        Ok(super::super::Schedule {
            seed: self.seed,
            steps: self.steps,
            ledger: ledger.en,
            ledger_zh: ledger.zh,
            history: history.en,
            history_zh: history.zh,
            disagreement_zh: disagreement.as_ref().map(|d| d.zh.clone()),
            disagreement: disagreement.map(|d| d.en),
            recorded: self.recorder.text(),
            violation: state.oversold > 0
                || state.duplicates > 0
                || stuck
                || twice
                || unowned
                || unordered
                || !twice_told.is_empty()
                || forgotten > 0
                || claim.is_some(),
        })
    }
}
