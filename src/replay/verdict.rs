//! A replay's verdict: what the live ledger shows of the property the
//! model's trace breaks, the history checker's second opinion beside it,
//! and the units answered sold to two buyers.

use redis::AsyncCommands;

use super::live::{Live, name};
use crate::check::Property;
use crate::client::Deduction;
use crate::judge::Observed;
use crate::judge::second::{SecondOpinion, second_opinion};
use crate::variants::Behaviour;

impl Live<'_> {
    /// The books read once every buyer answered, beside what each was
    /// told: the history checker's verdict, set beside the live run's
    /// (`broken`: whether it broke `property`).
    pub(super) async fn second_opinion(
        &self,
        property: Property,
        broken: bool,
    ) -> anyhow::Result<SecondOpinion> {
        let read_at = self.recorder.now();
        let books = self.stack.client.state(&self.sku).await?;
        self.recorder.read(&self.sku, read_at, books.remaining);
        let observed = match (property, broken) {
            (_, false) => Observed::Seen(Behaviour::Safe),
            (Property::Safety | Property::OneSale | Property::OrderedOnce, true) => {
                Observed::Seen(Behaviour::Oversells)
            }
            (Property::OrdersKept, true) => Observed::Seen(Behaviour::LosesUnits),
            (_, true) => Observed::Stuck,
        };
        Ok(second_opinion(&self.recorder, observed))
    }
}

/// What the live ledger shows of `property`, and whether it is broken.
pub(super) async fn judge(
    live: &mut Live<'_>,
    property: Property,
    crashed: &[u8],
) -> anyhow::Result<(String, bool)> {
    if property == Property::OrdersKept {
        return live.judge_orders().await;
    }
    let state = live.stack.client.state(&live.sku).await?;
    Ok(match property {
        // A failover loses what the old master had not replicated, its
        // sales' records with it: a unit sold twice shows in the answers.
        Property::Safety if live.failing.is_some() => {
            // The buyers the trace leaves past their write answer first.
            let mut pending: Vec<u8> = live.requests.keys().copied().collect();
            pending.sort_unstable();
            for n in pending.into_iter().filter(|n| !crashed.contains(n)) {
                live.finish_through(n).await?;
            }
            let twice = sold_twice(&live.answers);
            (
                format!(
                    "units answered sold to two buyers: {}; the new master's ledger: oversold {}, sold {} of {}",
                    match twice.is_empty() {
                        true => "none".to_owned(),
                        false => twice.join(", "),
                    },
                    state.oversold,
                    state.sold,
                    state.initial
                ),
                !twice.is_empty() || state.oversold > 0,
            )
        }
        Property::Safety => (
            format!(
                "oversold {}, duplicates {}, sold {} of {}",
                state.oversold, state.duplicates, state.sold, state.initial
            ),
            state.oversold > 0 || state.duplicates > 0,
        ),
        _ => {
            let mut conn = live.store.conn().await?;
            let ttl: i64 = conn.pttl(&live.keys.lock).await?;
            let stuck = ttl == -1 && !crashed.is_empty() && state.remaining > 0;
            (
                format!(
                    "the lock's TTL: {}; {} units left, its holder dead",
                    match ttl {
                        -1 => "none".to_owned(),
                        -2 => "no lock".to_owned(),
                        ms => format!("{ms} ms"),
                    },
                    state.remaining
                ),
                stuck,
            )
        }
    })
}

/// The units more than one buyer was answered sold, as "unit U (A, B)".
pub(crate) fn sold_twice<'a>(
    answers: impl IntoIterator<Item = (&'a u8, &'a Deduction)>,
) -> Vec<String> {
    let mut buyers: std::collections::BTreeMap<i64, Vec<String>> = Default::default();
    let mut sorted: Vec<_> = answers.into_iter().collect();
    sorted.sort_by_key(|(n, _)| **n);
    for (n, answer) in sorted {
        if let crate::client::DeductBody::Outcome(body) = &answer.body
            && let Some(unit) = body.unit
        {
            buyers.entry(unit).or_default().push(name(*n));
        }
    }
    buyers
        .into_iter()
        .filter(|(_, who)| who.len() > 1)
        .map(|(unit, who)| format!("unit {unit} ({})", who.join(", ")))
        .collect()
}
