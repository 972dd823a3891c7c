//! The cell's own claim, judged once its schedule is over: without it a
//! cell claiming the SKU frees itself, recovers, keeps selling or is busy
//! while the fault lasts would pass whatever the SKU did after. Safety is
//! the ledger's and the history checker's; this is what each claim says
//! of the sales that follow:
//!
//! - `frees`: a dead holder's lease runs out (the explorer brings it
//!   forward only where the store would end it: a lock with a TTL, an
//!   etcd lease or a ZooKeeper session whose keep-alives stopped), and
//!   then the units left sell;
//! - `recovers`: Redis came back (empty, its scripts forgotten, the SKU
//!   stocked again): the units left sell;
//! - `keeps selling`: the fault still lasting (the nodes still down, the
//!   dead buyer still dead), the units left sell;
//! - `busy`: no buyer of the schedule was sold while the fault lasted
//!   (until a node came back, or to the end), each was refused with a
//!   reason; once it is over the units left sell.
//!
//! "The units left sell": buyers outside the schedule (no gate, their own
//! request ids for the order variants), one after the other, are each sold
//! a unit until one is told sold out, and the books then hold none.

use super::super::run::{Buyer, name, nodes};
use super::super::{Choice, STOCK};
use super::Session;
use crate::variants::Behaviour;
use crate::wire::Said;

impl Session<'_> {
    /// What the cell's claim says of the schedule and the sales after it,
    /// or `None` where it holds (or says nothing a schedule can show).
    pub(super) async fn claim_broken(&mut self) -> anyhow::Result<Option<Said>> {
        let claim = self.claim;
        // (A run ended by hand, a buyer still on its way or at a gate, says
        // nothing of what follows it.)
        let unfinished =
            (self.run.buyers.values()).any(|b| matches!(b, Buyer::Sent(_) | Buyer::Waiting(..)));
        if unfinished
            || !matches!(
                claim,
                Behaviour::Frees | Behaviour::Recovers | Behaviour::KeepsSelling | Behaviour::Busy
            )
        {
            return Ok(None);
        }
        let said = Said {
            en: claim.name().to_owned(),
            zh: claim.name_zh().to_owned(),
        };
        if claim == Behaviour::Busy {
            // Judged when a node came back, if one did.
            let refused = self.refused.take().unwrap_or_else(|| self.refusals());
            if refused.is_some() {
                return Ok(refused);
            }
            // The fault is over: the nodes come back.
            nodes::set(self.run.stack, 0).await?;
        }
        if claim == Behaviour::Frees {
            let lock = self.run.lock().await?;
            if self.run.holder_dead() && super::super::strike::leased(self.variant, lock) {
                let sku = self.setup.sku.clone();
                (self.run)
                    .strike(&Choice::Expire, &mut self.budget, self.variant, &sku)
                    .await?;
            }
        }
        self.sell_what_is_left(&said).await
    }

    /// `busy`: how the buyers answered so far were answered while the
    /// fault lasted (each refused, with a reason), or what broke that.
    pub(super) fn refusals(&self) -> Option<Said> {
        let mut done: Vec<_> = (self.run.buyers.iter())
            .filter_map(|(n, b)| match b {
                Buyer::Done(answer) => Some((*n, answer)),
                _ => None,
            })
            .collect();
        done.sort_by_key(|(n, _)| *n);
        done.into_iter().find_map(|(n, answer)| {
            let (said, said_zh) = (Behaviour::Busy.name(), Behaviour::Busy.name_zh());
            let buyer = name(n);
            if answer.sold() {
                Some(crate::said!(
                    "{said}: {buyer} was sold while the fault lasted",
                    "{said_zh}:故障期间 {buyer} 买到了"
                ))
            } else if answer.status != 409 && answer.reason().is_none_or(str::is_empty) {
                let status = answer.status;
                Some(crate::said!(
                    "{said}: {buyer} was refused with no reason ({status})",
                    "{said_zh}:{buyer} 被拒绝却没有理由({status})"
                ))
            } else {
                None
            }
        })
    }

    /// Buyers outside the schedule, one after the other, until one is told
    /// sold out: each must be sold a unit, and none be left then.
    async fn sell_what_is_left(&mut self, said: &Said) -> anyhow::Result<Option<Said>> {
        let stack = self.run.stack;
        let sku = self.setup.sku.clone();
        let client = stack.client.recording(self.recorder.clone());
        for k in 0..=STOCK {
            let at = &stack.instances[k as usize % stack.instances.len()].url;
            let id = match self.variant.orders() {
                true => format!("&request_id={}-after-{k}", self.setup.run_id),
                false => String::new(),
            };
            let path = format!(
                "/deductStock/{}?sku={sku}&work_ms=0&lease_ms={}&wait_ms=0{id}",
                self.variant, self.lease_ms
            );
            let answer = client.at(at).deduct(&path).await;
            if answer.sold() {
                continue;
            }
            let left = stack.client.state(&sku).await?.remaining;
            // (409: sold out.)
            if answer.status == 409 && left <= 0 {
                return Ok(None);
            }
            let (status, reason) = (answer.status, answer.reason().unwrap_or_default());
            let (en, zh) = (&said.en, &said.zh);
            return Ok(Some(crate::said!(
                "{en}: after the schedule a buyer was answered {status} {reason} with {left} unit(s) left",
                "{zh}:调度结束后,还剩 {left} 件时一个买家得到的回答是 {status} {reason}"
            )));
        }
        Ok(None)
    }
}
