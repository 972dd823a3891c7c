//! The runs of `stocklock load` (and of the lab's race and the dashboard's
//! "race all"): one variant at a time, judged from the ledger before and
//! after.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::bail;

use super::engine::{self, Progress, Target};
use super::history;
use super::verdict::{contradiction, judge};
use super::{LoadConfig, resolve_target};
use crate::client::StackClient;
use crate::history::Recorder;
use crate::wire::{LatencyMs, RunReport, SkuResult, StateSnapshot, VariantInfo};

/// How long the control plane (reset, state, variants) may take to answer.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(10);

/// A stack under load: its API (resets, the ledger), the address the
/// requests go to, and what every run on it is asked for.
pub struct Runner {
    client: StackClient,
    target: Target,
    config: LoadConfig,
    /// With `--history`: what every request of every run was told.
    recorder: Option<Recorder>,
}

impl Runner {
    /// Opens `config.target`'s API and resolves its address.
    pub async fn connect(config: LoadConfig) -> anyhow::Result<Runner> {
        let client = StackClient::new(&config.target, config.admin_token.clone(), CONTROL_TIMEOUT)?;
        let target = resolve_target(&config.target).await?;
        let recorder = config.history.is_some().then(Recorder::new);
        Ok(Runner {
            client,
            target,
            config,
            recorder,
        })
    }

    /// Records every run into `recorder` (the lab's cell), as `--history`
    /// does into its own.
    pub fn recording(self, recorder: Recorder) -> Runner {
        Runner {
            recorder: Some(recorder),
            ..self
        }
    }

    /// The recorded history of every run so far (with `--history`).
    pub fn recorder(&self) -> Option<&Recorder> {
        self.recorder.as_ref()
    }

    /// The stack's API.
    pub fn client(&self) -> &StackClient {
        &self.client
    }

    /// One variant's run: reset, ledger before, load, ledger after, verdict.
    /// `progress` counts the requests done, for whoever shows it.
    pub async fn run_variant(
        &self,
        info: &VariantInfo,
        progress: &Progress,
    ) -> anyhow::Result<RunReport> {
        let config = &self.config;
        let base =
            (config.sku.clone()).unwrap_or_else(|| format!("{}{}", config.sku_prefix, info.name));
        let skus: Vec<String> = if config.skus > 1 {
            (0..config.skus).map(|i| format!("{base}-{i}")).collect()
        } else {
            vec![base.clone()]
        };
        if let Some(stock) = config.stock {
            if config.admin_token.is_none() {
                bail!(
                    "--stock resets the SKU through the admin API: give --admin-token or set STOCKLOCK_ADMIN_TOKEN (stocklock up prints it)"
                );
            }
            let buckets = config.buckets.unwrap_or_else(|| {
                info.name
                    .parse::<crate::variants::Variant>()
                    .map(|v| v.buckets())
                    .unwrap_or(0)
            });
            for sku in &skus {
                self.client.reset_retried(sku, stock, buckets).await?;
            }
        }
        let before = self.client.states_retried(&skus).await?;
        let recorded = self
            .recorder
            .as_ref()
            .map(|r| (r, history::declare(r, &before)));
        let plan = config.plan(
            skus.iter()
                .map(|sku| deduct_path(&info.name, sku, config))
                .collect(),
            self.recorder.clone(),
        );
        let tally = engine::run(&self.target, &plan, progress).await;
        let reading = self.recorder.as_ref().map(Recorder::now);
        let after_each = self.client.states_retried(&skus).await?;
        if let (Some((recorder, _)), Some(call)) = (&recorded, reading) {
            history::read_books(recorder, call, &after_each);
        }
        let per_sku: Vec<SkuResult> = if skus.len() > 1 {
            after_each.iter().map(SkuResult::from).collect()
        } else {
            Vec::new()
        };
        let (before, after) = (combined(&before), combined(&after_each));
        let sku = if skus.len() > 1 {
            format!("{base}-0..{}", skus.len() - 1)
        } else {
            base
        };

        let sold_in_run = after.sold - before.sold;
        let per_instance: BTreeMap<String, i64> = after
            .per_instance
            .iter()
            .map(|(name, n)| {
                (
                    name.clone(),
                    n - before.per_instance.get(name).copied().unwrap_or(0),
                )
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        let refused = after.busy - before.busy;
        let broken = after_each
            .iter()
            .map(|s| s.oversold)
            .min()
            .unwrap_or(0)
            .min(0);
        let judgement = judge(&after, &tally, sold_in_run, refused, broken);
        // Every 200 is a recorded sale; an unknown answer may be one too.
        let (told_sold, maybe_sold) = (tally.sold as i64, (tally.sold + tally.unknown) as i64);
        let disagreement = (!(told_sold..=maybe_sold).contains(&sold_in_run)).then(|| {
            format!(
                "the client received {} 200s and {} answers of unknown outcome, the ledger counted {sold_in_run} sales",
                tally.sold, tally.unknown
            )
        });
        let designed_to_race =
            config.concurrency > 1 && config.work_ms.unwrap_or(0) > 0 && per_instance.len() >= 2;
        let expected = config
            .expect
            .clone()
            .unwrap_or_else(|| info.expected.two_instances.clone());
        let is_order_variant = info
            .name
            .parse::<crate::variants::Variant>()
            .is_ok_and(|v| v.orders());
        let orders = match (is_order_variant, skus.as_slice()) {
            (true, [one]) => super::orders::check(&self.client, one).await,
            _ => None,
        };
        let mut contradiction = contradiction(&expected, &judgement.verdict, designed_to_race);
        let history =
            recorded.map(|(recorder, names)| history::judge(recorder, &names, &judgement.verdict));
        if let Some(why) = history.as_ref().and_then(|h| h.disagreement.as_ref()) {
            contradiction.get_or_insert_with(|| format!("the two judges disagree: {why}"));
        }
        if let Some(check) = orders.as_ref().filter(|c| !c.clean) {
            contradiction.get_or_insert_with(|| format!("reconcile: {}", check.verdict));
        }
        Ok(RunReport {
            orders,
            variant: info.name.clone(),
            sku,
            requests: tally.requests,
            sold: tally.sold,
            sold_out: tally.sold_out,
            busy: tally.busy,
            unknown: tally.unknown,
            errors: tally.errors,
            rps: tally.rps(),
            latency_ms: LatencyMs {
                p50: tally.latency_ms(0.5),
                p90: tally.latency_ms(0.9),
                p99: tally.latency_ms(0.99),
                max: tally.max_latency_ms(),
            },
            initial: after.initial,
            remaining: after.remaining,
            oversold: after.oversold,
            duplicates: after.duplicates,
            per_instance,
            contradiction,
            verdict: judgement.to_string(),
            unsold: judgement.unsold,
            expected,
            disagreement,
            elapsed_s: tally.elapsed.as_secs_f64(),
            per_sku,
            history,
        })
    }
}

/// The query string of the deduct requests.
fn deduct_path(variant: &str, sku: &str, config: &LoadConfig) -> String {
    let mut path = format!("/deductStock/{variant}?sku={sku}");
    for (name, value) in [
        ("work_ms", config.work_ms),
        ("lease_ms", config.lease_ms),
        ("wait_ms", config.wait_ms),
        ("replicas", config.replicas.map(u64::from)),
    ] {
        if let Some(value) = value {
            path.push_str(&format!("&{name}={value}"));
        }
    }
    path
}

/// Several SKUs' states as one: the sums, with `oversold` and `duplicates`
/// summed per SKU (an oversell in one SKU is not cancelled by stock left
/// in another).
fn combined(states: &[StateSnapshot]) -> StateSnapshot {
    let mut total = states.first().cloned().unwrap_or_default();
    for state in states.iter().skip(1) {
        total.absorb(state);
    }
    if states.len() > 1 {
        total.oversold = states.iter().map(|s| s.oversold.max(0)).sum();
    }
    total
}
