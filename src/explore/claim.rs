//! Retry-storm's own event: the request id's claim running out under the
//! attempt that holds it, while it is alive and at its work. The claim's
//! deadline passes on Redis's clock; the explorer brings it forward, as
//! `Expire` does for a lock's lease, and the buyers told "in progress"
//! ask again, one of them taking the claim over.

use redis::AsyncCommands;

use super::Choice;
use super::run::{Buyer, Run, name};

impl Run<'_> {
    /// The request ids whose claim stands (an attempt under way): each
    /// with its record, `pending:TOKEN:DEADLINE`.
    pub(super) async fn pending_claims(&self) -> anyhow::Result<Vec<(String, String)>> {
        let mut conn = self.store.conn().await?;
        let all: Vec<(String, String)> = conn.hgetall(&self.keys.requests).await?;
        Ok(all
            .into_iter()
            .filter(|(_, record)| record.starts_with("pending:"))
            .collect())
    }

    /// Whether a claim may run out now: one stands, and a buyer (its
    /// holder, alive) waits at a gate.
    pub(super) async fn claim_may_run_out(&self, waiting: &[u8]) -> anyhow::Result<bool> {
        Ok(!waiting.is_empty() && !self.pending_claims().await?.is_empty())
    }

    /// Every standing claim's deadline moved into the past, its holder's
    /// token kept: the next attempt of its id takes it over.
    pub(super) async fn claims_run_out(&mut self) -> anyhow::Result<()> {
        let claims = self.pending_claims().await?;
        anyhow::ensure!(!claims.is_empty(), "no request id's claim stands");
        let mut conn = self.store.conn().await?;
        for (id, record) in claims {
            let token = record.split(':').nth(1).unwrap_or_default();
            let _: i64 = conn
                .hset(&self.keys.requests, id, format!("pending:{token}:0"))
                .await?;
        }
        self.claim_ran_out = true;
        Ok(())
    }

    /// Once a claim ran out: the buyers told their id was in progress,
    /// each of whom asks again (once).
    pub(super) fn asking_again(&self) -> Vec<Choice> {
        if !self.claim_ran_out {
            return Vec::new();
        }
        let mut told: Vec<u8> = (self.buyers.iter())
            .filter(|(n, b)| {
                !self.asked_again.contains(n)
                    && matches!(b, Buyer::Done(a) if a.reason() == Some("in_progress"))
            })
            .map(|(&n, _)| n)
            .collect();
        told.sort_unstable();
        told.into_iter()
            .map(|n| Choice::Retry { buyer: name(n) })
            .collect()
    }
}
