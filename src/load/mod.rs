//! `stocklock load`: the load generator and its verdict.
//!
//! For each variant: reset its SKU (with `--stock`), read the ledger, fire
//! the load through [`engine`], read the ledger again, and judge. The
//! numbers that decide the verdict come from the ledger (`/api/state`), never
//! from what the client believes; the client's own count of 200s is compared
//! with the ledger's and any disagreement is flagged.

pub mod bench;
pub mod engine;

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use hyper::Method;
use indicatif::{ProgressBar, ProgressStyle};

use self::engine::{Plan, Progress, Tally, Target};
use crate::wire::{
    LatencyMs, LoadReport, RunReport, SkuResult, StateSnapshot, Unsold, VariantInfo,
};

/// What `stocklock load` was asked for.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// `http://host:port` (normally nginx).
    pub target: String,
    /// Variant names, or `["all"]`.
    pub variants: Vec<String>,
    /// One SKU for every run; by default each variant uses its own name.
    pub sku: Option<String>,
    /// Reset the SKU to this stock before each run.
    pub stock: Option<i64>,
    pub admin_token: Option<String>,
    pub requests: Option<u64>,
    pub duration: Option<Duration>,
    pub concurrency: usize,
    pub rate: Option<f64>,
    pub work_ms: Option<u64>,
    pub lease_ms: Option<u64>,
    pub wait_ms: Option<u64>,
    pub timeout: Duration,
    pub json: Option<PathBuf>,
    pub check: bool,
    /// Overrides every variant's expected verdict (`safe` or `oversells`).
    pub expect: Option<String>,
    /// Spread each run over this many SKUs (`SKU-0` ... `SKU-n-1`), one
    /// request in turn to each: on a cluster, over every master.
    pub skus: usize,
    /// Buckets per SKU at reset (default: the variant's, 8 for `lua-sharded`).
    pub buckets: Option<u32>,
}

impl LoadConfig {
    /// A run on `target` with `stocklock load`'s defaults: every variant,
    /// 400 requests, 64 at a time, no knobs, no reset, one SKU per variant.
    /// Callers change what they need with `..LoadConfig::new(..)`.
    pub fn new(target: &str, admin_token: Option<String>) -> Self {
        Self {
            target: target.to_owned(),
            variants: vec!["all".to_owned()],
            sku: None,
            stock: None,
            admin_token,
            requests: None,
            duration: None,
            concurrency: 64,
            rate: None,
            work_ms: None,
            lease_ms: None,
            wait_ms: None,
            timeout: Duration::from_secs(150),
            json: None,
            check: false,
            expect: None,
            skus: 1,
            buckets: None,
        }
    }
}

/// A control-plane client for the stack's API (state, variants, reset).
pub struct Api {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Api {
    pub fn new(base: &str, token: Option<String>) -> anyhow::Result<Self> {
        Ok(Self {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()?,
            base: base.trim_end_matches('/').to_owned(),
            token,
        })
    }

    /// Sends `request` to `url` and reads a JSON answer; a refusal says
    /// what was refused and why.
    async fn exchange<T: serde::de::DeserializeOwned>(
        url: &str,
        what: &str,
        request: reqwest::RequestBuilder,
    ) -> anyhow::Result<T> {
        let response = request
            .send()
            .await
            .map_err(|err| unreachable_target(url, err))?;
        let status = response.status();
        if !status.is_success() {
            bail!(
                "{what}: {status}: {}",
                response.text().await.unwrap_or_default()
            );
        }
        response
            .json()
            .await
            .with_context(|| format!("{what}: unexpected answer"))
    }

    async fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        let url = format!("{}{path}", self.base);
        Self::exchange(&url, &format!("GET {url}"), self.http.get(&url)).await
    }

    pub async fn variants(&self) -> anyhow::Result<Vec<VariantInfo>> {
        self.get("/api/variants").await
    }

    pub async fn state(&self, sku: &str) -> anyhow::Result<StateSnapshot> {
        self.get(&format!("/api/state?sku={sku}")).await
    }

    /// The states of `skus`, 16 requests at a time.
    pub async fn states(&self, skus: &[String]) -> anyhow::Result<Vec<StateSnapshot>> {
        let mut states = Vec::with_capacity(skus.len());
        for chunk in skus.chunks(16) {
            let mut asks = Vec::with_capacity(chunk.len());
            for sku in chunk {
                asks.push(self.state(sku));
            }
            for state in futures_util::future::join_all(asks).await {
                states.push(state?);
            }
        }
        Ok(states)
    }

    pub async fn reset(
        &self,
        sku: &str,
        stock: i64,
        buckets: u32,
    ) -> anyhow::Result<StateSnapshot> {
        let Some(token) = &self.token else {
            bail!(
                "--stock resets the SKU through the admin API: give --admin-token or set STOCKLOCK_ADMIN_TOKEN (stocklock up prints it)"
            );
        };
        let url = format!("{}/api/admin/reset", self.base);
        let request = self
            .http
            .post(&url)
            .bearer_auth(token)
            .json(&serde_json::json!({ "sku": sku, "stock": stock, "buckets": buckets }));
        Self::exchange(&url, &format!("reset of {sku} refused"), request).await
    }
}

fn unreachable_target(url: &str, err: reqwest::Error) -> anyhow::Error {
    let reason = if err.is_connect() {
        "cannot connect (is the stack up? ./scripts/up.sh)".to_owned()
    } else if err.is_timeout() {
        "no answer within 10 s".to_owned()
    } else {
        err.to_string()
    };
    anyhow::anyhow!("{url}: {reason}")
}

/// Resolves `http://host:port` into an address and a Host header.
pub async fn resolve_target(url: &str) -> anyhow::Result<Target> {
    let uri: hyper::Uri = url
        .parse()
        .with_context(|| format!("--target {url:?} is not a URL"))?;
    if uri.scheme_str() != Some("http") {
        bail!("--target must be an http:// URL, got {url:?}");
    }
    let authority = uri.authority().context("--target has no host")?.clone();
    let port = authority.port_u16().unwrap_or(80);
    let addr: SocketAddr = tokio::net::lookup_host((authority.host(), port))
        .await
        .with_context(|| format!("cannot resolve {}", authority.host()))?
        .next()
        .with_context(|| format!("{} resolves to no address", authority.host()))?;
    Ok(Target {
        addr,
        authority: authority.to_string(),
    })
}

/// What the ledger says about one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Safe,
    /// Sales no stock backs.
    Oversold(i64),
    /// Units sold twice, with no oversell (possible when stock is written back wrong).
    Duplicates(i64),
    /// Stock left, nothing sold, everyone told busy: a lock nobody releases.
    Stuck,
    /// `oversold` below zero: stock left without a recorded sale. Every
    /// sale is recorded with its write, so this is the ledger itself broken,
    /// and it fails every check: it would hide as much real oversell.
    LedgerBroken(i64),
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Safe => f.write_str("SAFE"),
            Verdict::Oversold(n) => write!(f, "OVERSOLD {n}"),
            Verdict::Duplicates(n) => write!(f, "DUPLICATES {n}"),
            Verdict::Stuck => f.write_str("STUCK"),
            Verdict::LedgerBroken(n) => write!(f, "LEDGER_BROKEN {n}"),
        }
    }
}

/// A run's verdict, and whether it under-sold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judgement {
    pub verdict: Verdict,
    pub unsold: Option<Unsold>,
}

impl std::fmt::Display for Judgement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.verdict)?;
        if let Some(unsold) = &self.unsold {
            write!(f, ", {unsold}")?;
        }
        Ok(())
    }
}

/// Judges a run from the ledger after it (`refused`: the ledger's busy
/// answers during the run) and the client's counts. `broken` is the
/// negative oversell of any SKU of the run (0: none).
pub fn judge(
    after: &StateSnapshot,
    tally: &Tally,
    sold_in_run: i64,
    refused: i64,
    broken: i64,
) -> Judgement {
    let verdict = if broken < 0 {
        Verdict::LedgerBroken(broken)
    } else if after.oversold > 0 {
        Verdict::Oversold(after.oversold)
    } else if after.duplicates > 0 {
        Verdict::Duplicates(after.duplicates)
    } else if after.remaining > 0
        && sold_in_run == 0
        && tally.busy > 0
        && tally.busy + tally.errors.total() == tally.requests
    {
        Verdict::Stuck
    } else {
        Verdict::Safe
    };
    let unsold = (after.remaining > 0 && refused > 0).then_some(Unsold {
        left: after.remaining,
        refused,
    });
    Judgement { verdict, unsold }
}

/// Whether the verdict contradicts the variant's expectation. A variant
/// expected to oversell only has to show it when the run was built to: more
/// than one request at a time, business work to widen the gap, and at least
/// two instances serving (the matrix's "2 instances" column).
pub fn contradiction(expected: &str, verdict: &Verdict, designed_to_race: bool) -> Option<String> {
    let expected_safe = expected == "safe";
    let expected_to_fail = expected.starts_with("oversells");
    match verdict {
        Verdict::LedgerBroken(n) => Some(format!(
            "the ledger broke (oversold {n} < 0: stock left without a recorded sale); no verdict can be trusted"
        )),
        Verdict::Safe if expected_to_fail && designed_to_race => Some(format!(
            "expected '{expected}' under this load (2+ instances, concurrency > 1, work_ms > 0) but it stayed SAFE"
        )),
        Verdict::Safe => None,
        broken if expected_safe => Some(format!("expected safe, observed {broken}")),
        _ => None,
    }
}

/// Runs the whole command: every variant in turn, a table, JSON, `--check`.
pub async fn run(config: LoadConfig) -> anyhow::Result<bool> {
    if config.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    let api = Api::new(&config.target, config.admin_token.clone())?;
    let target = resolve_target(&config.target).await?;
    let known = api.variants().await?;
    let variants: Vec<&VariantInfo> = if config.variants.iter().any(|v| v == "all") {
        known.iter().collect()
    } else {
        config
            .variants
            .iter()
            .map(|name| {
                known.iter().find(|v| &v.name == name).with_context(|| {
                    let names: Vec<&str> = known.iter().map(|v| v.name.as_str()).collect();
                    format!("no variant {name:?}; valid: {}, or all", names.join(", "))
                })
            })
            .collect::<anyhow::Result<_>>()?
    };
    if variants.len() > 1 && config.sku.is_some() && config.stock.is_none() {
        eprintln!(
            "note: every variant runs on the same SKU without a reset in between (--stock resets it)"
        );
    }

    let mut reports = Vec::new();
    for info in variants {
        let progress = Progress::default();
        let work = run_variant(&api, &target, &config, info, &progress);
        let report = with_progress(&info.name, planned_requests(&config), &progress, work).await?;
        reports.push(report);
    }
    print_table(&reports);
    if let Some(path) = &config.json {
        let report = LoadReport {
            runs: reports.clone(),
        };
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    let mut ok = true;
    for report in &reports {
        if let Some(why) = &report.disagreement {
            eprintln!("DISAGREEMENT {}: {why}", report.variant);
        }
        if let Some(why) = &report.contradiction {
            eprintln!("CONTRADICTION {}: {why}", report.variant);
            ok = false;
        }
    }
    Ok(!config.check || ok)
}

/// Loads one path with no verdict: a baseline (`--path /healthz`).
pub async fn run_path(
    target_url: &str,
    path: &str,
    requests: Option<u64>,
    duration: Option<Duration>,
    concurrency: usize,
    rate: Option<f64>,
    timeout: Duration,
) -> anyhow::Result<()> {
    if !path.starts_with('/') {
        bail!("--path must start with '/', got {path:?}");
    }
    if concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    let target = resolve_target(target_url).await?;
    let plan = Plan {
        method: Method::GET,
        paths: vec![path.to_owned()],
        concurrency,
        requests: requests.or(if duration.is_some() { None } else { Some(400) }),
        duration,
        rate,
        timeout,
    };
    let progress = Progress::default();
    let tally = with_progress(
        path,
        plan.requests,
        &progress,
        engine::run(&target, &plan, &progress),
    )
    .await;
    let e = tally.errors;
    println!(
        "GET {path}: {} requests in {:.2} s, {:.0} req/s | p50 {:.2} ms p90 {:.2} ms p99 {:.2} ms max {:.2} ms | \
         200 {} 409 {} 429 {} other 2xx {} | errors: connect {} timeout {} 5xx {} other {}",
        tally.requests,
        tally.elapsed.as_secs_f64(),
        tally.rps(),
        tally.latency_ms(0.5),
        tally.latency_ms(0.9),
        tally.latency_ms(0.99),
        tally.max_latency_ms(),
        tally.sold,
        tally.sold_out,
        tally.busy,
        tally.ok_other,
        e.connect,
        e.timeout,
        e.server,
        e.other
    );
    if tally.requests > 0 && e.connect == tally.requests {
        bail!("{target_url}: cannot connect (is the stack up? ./scripts/up.sh)");
    }
    Ok(())
}

/// The query string of the deduct requests.
fn deduct_path(variant: &str, sku: &str, config: &LoadConfig) -> String {
    let mut path = format!("/deductStock/{variant}?sku={sku}");
    for (name, value) in [
        ("work_ms", config.work_ms),
        ("lease_ms", config.lease_ms),
        ("wait_ms", config.wait_ms),
    ] {
        if let Some(value) = value {
            path.push_str(&format!("&{name}={value}"));
        }
    }
    path
}

/// Requests per variant: `--requests`, or 400 unless a duration is given.
pub fn planned_requests(config: &LoadConfig) -> Option<u64> {
    config.requests.or(if config.duration.is_some() {
        None
    } else {
        Some(400)
    })
}

/// One variant's run: reset, ledger before, load, ledger after, verdict.
/// `progress` counts the requests done, for whoever shows it.
pub async fn run_variant(
    api: &Api,
    target: &Target,
    config: &LoadConfig,
    info: &VariantInfo,
    progress: &Progress,
) -> anyhow::Result<RunReport> {
    let base = config.sku.clone().unwrap_or_else(|| info.name.clone());
    let skus: Vec<String> = if config.skus > 1 {
        (0..config.skus).map(|i| format!("{base}-{i}")).collect()
    } else {
        vec![base.clone()]
    };
    if let Some(stock) = config.stock {
        let buckets = config.buckets.unwrap_or_else(|| {
            info.name
                .parse::<crate::variants::Variant>()
                .map(|v| v.buckets())
                .unwrap_or(0)
        });
        for sku in &skus {
            api.reset(sku, stock, buckets).await?;
        }
    }
    let before = api.states(&skus).await?;
    let plan = Plan {
        method: Method::GET,
        paths: skus
            .iter()
            .map(|sku| deduct_path(&info.name, sku, config))
            .collect(),
        concurrency: config.concurrency,
        requests: planned_requests(config),
        duration: config.duration,
        rate: config.rate,
        timeout: config.timeout,
    };
    let tally = engine::run(target, &plan, progress).await;
    let after_each = api.states(&skus).await?;
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
    Ok(RunReport {
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
        contradiction: contradiction(&expected, &judgement.verdict, designed_to_race),
        verdict: judgement.to_string(),
        unsold: judgement.unsold,
        expected,
        disagreement,
        elapsed_s: tally.elapsed.as_secs_f64(),
        per_sku,
    })
}

/// Several SKUs' states as one: the sums, with `oversold` and `duplicates`
/// summed per SKU (an oversell in one SKU is not cancelled by stock left
/// in another).
pub fn combined(states: &[StateSnapshot]) -> StateSnapshot {
    let mut total = states.first().cloned().unwrap_or_default();
    for state in states.iter().skip(1) {
        total.absorb(state);
    }
    if states.len() > 1 {
        total.oversold = states.iter().map(|s| s.oversold.max(0)).sum();
    }
    total
}

/// Runs `work` while showing `progress` on stderr: a bar on a terminal, a
/// line a second otherwise (logs and CI).
async fn with_progress<T>(
    name: &str,
    requests: Option<u64>,
    progress: &Progress,
    work: impl Future<Output = T>,
) -> T {
    let tty = std::io::stderr().is_terminal();
    let bar = tty.then(|| {
        let bar = match requests {
            Some(n) => ProgressBar::new(n),
            None => ProgressBar::new_spinner(),
        };
        let style =
            ProgressStyle::with_template("{prefix:>12} {bar:40} {pos}/{len} requests {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_prefix(name.to_owned());
        bar
    });
    let mut tick = tokio::time::interval(if tty {
        Duration::from_millis(100)
    } else {
        Duration::from_secs(1)
    });
    tick.tick().await;
    tokio::pin!(work);
    loop {
        tokio::select! {
            result = &mut work => {
                if let Some(bar) = bar {
                    bar.finish_and_clear();
                }
                return result;
            }
            _ = tick.tick() => {
                let done = progress.done();
                match &bar {
                    Some(bar) => bar.set_position(done),
                    None => eprintln!(
                        "{name}: {done}{} requests",
                        requests.map(|n| format!("/{n}")).unwrap_or_default()
                    ),
                }
            }
        }
    }
}

/// The comparison table, one row per variant.
pub fn print_table(reports: &[RunReport]) {
    println!(
        "{:<12} {:>8} {:>6} {:>8} {:>6} {:>7} {:>6} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8} {:>5}  {:<16} {:<14} verdict",
        "variant",
        "requests",
        "sold",
        "sold_out",
        "busy",
        "unknown",
        "errors",
        "req/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "remaining",
        "oversold",
        "dups",
        "per instance",
        "expected"
    );
    for r in reports {
        let share: Vec<String> = r
            .per_instance
            .iter()
            .map(|(name, n)| format!("{name}:{n}"))
            .collect();
        println!(
            "{:<12} {:>8} {:>6} {:>8} {:>6} {:>7} {:>6} {:>9.0} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>9} {:>8} {:>5}  {:<16} {:<14} {}",
            r.variant,
            r.requests,
            r.sold,
            r.sold_out,
            r.busy,
            r.unknown,
            r.errors.total(),
            r.rps,
            r.latency_ms.p50,
            r.latency_ms.p90,
            r.latency_ms.p99,
            r.latency_ms.max,
            r.remaining,
            r.oversold,
            r.duplicates,
            share.join(" "),
            r.expected,
            r.verdict
        );
    }
    let errors: Vec<String> = reports
        .iter()
        .filter(|r| r.errors.total() > 0)
        .map(|r| {
            let e = r.errors;
            format!(
                "{}: connect {} timeout {} 5xx {} other {}",
                r.variant, e.connect, e.timeout, e.server, e.other
            )
        })
        .collect();
    if !errors.is_empty() {
        println!("errors by kind: {}", errors.join("; "));
    }
    for r in reports.iter().filter(|r| !r.per_sku.is_empty()) {
        let oversold: Vec<String> = r
            .per_sku
            .iter()
            .filter(|s| s.oversold > 0 || s.duplicates > 0)
            .map(|s| format!("{} +{}", s.sku, s.oversold.max(s.duplicates)))
            .collect();
        let worst = r.per_sku.iter().map(|s| s.oversold).max().unwrap_or(0);
        println!(
            "{}: {} SKUs, oversold in {} of them (worst {worst}){}{}",
            r.variant,
            r.per_sku.len(),
            oversold.len(),
            if oversold.is_empty() { "" } else { ": " },
            oversold.join(", ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(initial: i64, remaining: i64, sold: i64) -> StateSnapshot {
        StateSnapshot::counted(initial, remaining, sold)
    }

    fn tally(requests: u64, busy: u64) -> Tally {
        let mut tally = Tally::new();
        tally.requests = requests;
        tally.busy = busy;
        tally
    }

    #[test]
    fn a_negative_oversell_is_a_broken_ledger_that_fails_every_check() {
        // Stock left without a recorded sale: it would cancel one real oversell.
        let state = after(50, 40, 9);
        let judged = judge(&state, &tally(10, 0), 9, 0, state.oversold);
        assert_eq!(judged.verdict, Verdict::LedgerBroken(-1));
        assert_eq!(judged.to_string(), "LEDGER_BROKEN -1");
        for expected in ["safe", "oversells"] {
            for raced in [true, false] {
                assert!(contradiction(expected, &judged.verdict, raced).is_some());
            }
        }
        // The same numbers with the sale recorded: safe.
        let state = after(50, 40, 10);
        assert_eq!(
            judge(&state, &tally(10, 0), 10, 0, 0).verdict,
            Verdict::Safe
        );
    }

    #[test]
    fn stock_left_while_buyers_were_refused_is_under_selling() {
        let state = after(50, 45, 5);
        let judged = judge(&state, &tally(400, 395), 5, 395, 0);
        assert_eq!(judged.verdict, Verdict::Safe);
        assert_eq!(
            judged.to_string(),
            "SAFE, unsold 45 while 395 buyers were refused"
        );
        // Sold out: nothing left on the shelf, whatever was refused.
        let sold_out = after(50, 0, 50);
        assert_eq!(judge(&sold_out, &tally(400, 3), 50, 3, 0).unsold, None);
        // Stock left but nobody refused (a short run): not under-selling.
        assert_eq!(judge(&state, &tally(5, 0), 5, 0, 0).unsold, None);
        // Everyone refused and nothing sold: stuck, and under-selling too.
        let stuck = after(50, 50, 0);
        let judged = judge(&stuck, &tally(10, 10), 0, 10, 0);
        assert_eq!(
            judged.to_string(),
            "STUCK, unsold 50 while 10 buyers were refused"
        );
    }
}
