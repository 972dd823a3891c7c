//! `stocklock lab`: every failure mode of the articles, run end to end, and
//! the teaching matrix it proves.
//!
//! The lab starts its own Redis and its own stack (`up --chaos`, two
//! instances, instance b's clock five seconds ahead), runs each scenario
//! against each variant it applies to, and judges every cell from the
//! ledger and the overlap witness, never from what a variant believes. A
//! cell passes when the observed behaviour is the one DESIGN.md's matrix
//! expects (oversells, safe, deadlock, frees after the lease, recovers).

pub mod stack;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use self::stack::{Stack, UpOptions};
use crate::chaos;
use crate::knobs::Sku;
use crate::load::engine::Progress;
use crate::load::{self, Api, LoadConfig};
use crate::store::{Keys, Store};
use crate::up::process::signal;
use crate::up::redis::RedisServer;
use crate::variants::Variant;
use crate::wire::{StateSnapshot, VariantInfo};

/// Every scenario, in the order the lab runs them.
pub const SCENARIOS: [&str; 12] = [
    "race",
    "slow-business",
    "crash-after-setnx",
    "pause-holder",
    "kill-instance",
    "lock-vanishes",
    "retry-storm",
    "clock-skew",
    "redis-restart",
    "redlock-minority-down",
    "redlock-majority-down",
    "redlock-restart-without-persistence",
];

/// How far ahead instance b's clock runs (for `clock-skew`).
const SKEW_MS: i64 = 5_000;
/// Each cell must finish within this.
const CELL_TIMEOUT: Duration = Duration::from_secs(30);

/// What `stocklock lab` was asked for.
#[derive(Clone, Debug)]
pub struct LabConfig {
    /// Scenario names; empty: all.
    pub scenarios: Vec<String>,
    /// Variant names; empty: all.
    pub variants: Vec<String>,
    pub json: Option<PathBuf>,
    /// A running stack to use instead of starting one: its URL (nginx),
    /// which must run `up --chaos` with two instances (b's clock 5 s ahead
    /// for `clock-skew`), its admin token and its Redis.
    pub target: Option<Target>,
}

/// `--target`: a running chaos-mode stack.
#[derive(Clone, Debug)]
pub struct Target {
    pub url: String,
    pub admin_token: String,
    pub redis_url: String,
}

/// One cell of the matrix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cell {
    pub scenario: String,
    pub variant: String,
    pub expected: String,
    pub observed: String,
    pub pass: bool,
    pub evidence: String,
}

/// `stocklock lab --json FILE`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabReport {
    pub cells: Vec<Cell>,
}

/// What the matrix expects of `variant` in `scenario`, or `None` where the
/// scenario does not apply.
pub fn expected(scenario: &str, info: &VariantInfo) -> Option<String> {
    let v = info.name.as_str();
    let matrix = |cell: &str| (cell != "-").then(|| cell.to_owned());
    match scenario {
        "race" => matrix(&info.expected.two_instances),
        "slow-business" => matrix(&info.expected.work_exceeds_lease),
        "crash-after-setnx" => (v == "setnx").then(|| info.expected.crash_after_acquire.clone()),
        "kill-instance" => matches!(
            v,
            "setnx-expiry" | "token" | "watchdog" | "fenced" | "redlock"
        )
        .then(|| info.expected.crash_after_acquire.clone()),
        "pause-holder" => matrix(&info.expected.pause_exceeds_lease),
        // A lock deleted under its holder (a failover, a clock jump).
        "lock-vanishes" => match v {
            "setnx" | "setnx-expiry" | "token" => Some("oversells".to_owned()),
            "watchdog" => Some("safe (the renewal notices; the holder backs off)".to_owned()),
            "fenced" => Some("safe (stale token refused)".to_owned()),
            _ => None,
        },
        "retry-storm" => Some("safe (one sale per request_id)".to_owned()),
        "clock-skew" => match v {
            "setnx-expiry" => Some("oversells (steals a live lock)".to_owned()),
            "token" | "watchdog" => Some("safe (Redis keeps the time)".to_owned()),
            _ => None,
        },
        "redis-restart" => matches!(v, "token" | "watchdog" | "lua").then(|| "recovers".to_owned()),
        // Two of Redlock's five nodes killed.
        "redlock-minority-down" => {
            (v == "redlock").then(|| info.expected.redis_minority_down.clone())
        }
        "redlock-majority-down" => {
            (v == "redlock").then(|| "busy (no quorum), recovers when the nodes return".to_owned())
        }
        // A node that granted the lock restarts empty while the holder is
        // frozen; for `fenced`, its one Redis forgets the lock the same way.
        "redlock-restart-without-persistence" => match v {
            "redlock" => Some("oversells (a second owner finds a majority)".to_owned()),
            "fenced" => Some("safe (stale token refused)".to_owned()),
            _ => None,
        },
        _ => None,
    }
}

/// The kind of behaviour a matrix cell names: its first word.
fn category(text: &str) -> &str {
    text.split([' ', ',', '(']).next().unwrap_or(text)
}

/// What the witness saw: pairs of sections that overlapped in time.
#[derive(Default)]
struct Overlaps {
    count: usize,
    example: Option<String>,
}

/// Two buyers on two instances, the first inside its section when the
/// second comes.
struct Duel {
    holder: String,
    newcomer: String,
    observed: &'static str,
    evidence: String,
}

/// Everything a scenario works with.
struct Lab {
    stack: Stack,
    /// The Redis the lab started (`None` with `--target`: then the
    /// `redis-restart` scenario is skipped).
    redis: Option<RedisServer>,
    redis_url: String,
    store: Store,
    /// Redlock nodes the lab restarted itself (they replace `up`'s).
    restarted_nodes: Vec<RedisServer>,
}

impl Lab {
    fn instance(&self, index: usize) -> &str {
        &self.stack.instances[index].url
    }

    async fn state(&self, sku: &str) -> anyhow::Result<StateSnapshot> {
        self.stack.state(sku).await
    }

    /// Overlapping critical sections the witness recorded for `sku`: how
    /// many pairs, and the first pair's holders (owner#fencing token).
    async fn overlaps(&self, sku: &str) -> anyhow::Result<Overlaps> {
        let mut conn = self.store.conn().await?;
        let sections = chaos::sections(&mut conn, &Keys::new(&Sku::parse(sku)?)).await?;
        let pairs = chaos::overlaps(&sections);
        let holder = |s: &chaos::Section| {
            s.holder
                .clone()
                .unwrap_or_else(|| format!("{} (no owner)", s.instance))
        };
        Ok(Overlaps {
            count: pairs.len(),
            example: pairs
                .first()
                .map(|(a, b)| format!("{} with {}", holder(a), holder(b))),
        })
    }

    /// Resolves when a holder of `sku`'s lock has read the stock: inside the
    /// gap between its read and its write (announced in chaos mode).
    async fn section_entered(
        &self,
        sku: &str,
    ) -> anyhow::Result<impl std::future::Future<Output = ()> + use<>> {
        let client = redis::Client::open(self.redis_url.as_str())?;
        let mut events = client.get_async_pubsub().await?;
        events
            .subscribe(chaos::section_channel(&Keys::new(&Sku::parse(sku)?)))
            .await?;
        Ok(async move {
            let mut stream = events.into_on_message();
            let _ = tokio::time::timeout(Duration::from_secs(10), stream.next()).await;
        })
    }

    /// A GET to `base` (an instance or nginx), in the background.
    fn send(&self, base: &str, query: String) -> tokio::task::JoinHandle<(u16, Value)> {
        let (http, url) = (self.stack.http.clone(), format!("{base}{query}"));
        tokio::spawn(async move {
            match http.get(url).send().await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    (status, response.json().await.unwrap_or(Value::Null))
                }
                Err(_) => (0, Value::Null),
            }
        })
    }

    /// A holder on instance a; once it is inside its section (and after
    /// `strike`, a chaos action, if any), a newcomer on instance b. Both
    /// answers, and the verdict from the ledger and the witness.
    async fn duel(
        &self,
        v: &str,
        holder: &str,
        newcomer: &str,
        strike: Option<Value>,
    ) -> anyhow::Result<Duel> {
        let entered = self.section_entered(v).await?;
        let first = self.send(self.instance(0), holder.to_owned());
        entered.await;
        if let Some(action) = strike {
            self.stack.chaos(action).await?;
        }
        let second = self.send(self.instance(1), newcomer.to_owned()).await?;
        let first = first.await?;
        let state = self.state(v).await?;
        let (observed, evidence) = Lab::judged_by_ledger(&state, self.overlaps(v).await?);
        let answer = |(status, body): (u16, Value)| {
            format!("{status} {}", body["reason"].as_str().unwrap_or(""))
        };
        Ok(Duel {
            holder: answer(first),
            newcomer: answer(second),
            observed,
            evidence,
        })
    }

    fn judged_by_ledger(state: &StateSnapshot, overlaps: Overlaps) -> (&'static str, String) {
        let observed = if state.oversold > 0 || state.duplicates > 0 {
            "oversells"
        } else {
            "safe"
        };
        let evidence = format!(
            "oversold {} duplicates {} overlapping sections {}{} sold {} of {} busy {} lost leases {} stale tokens refused {}",
            state.oversold,
            state.duplicates,
            overlaps.count,
            overlaps
                .example
                .map(|e| format!(" (e.g. {e})"))
                .unwrap_or_default(),
            state.sold,
            state.initial,
            state.busy,
            state.lost_locks,
            state.fenced_rejections
        );
        (observed, evidence)
    }
}

/// Runs the lab and prints the matrix; `Ok(false)` if any cell failed.
pub async fn run(config: LabConfig) -> anyhow::Result<bool> {
    let scenarios: Vec<&str> = if config.scenarios.is_empty() {
        SCENARIOS.to_vec()
    } else {
        config
            .scenarios
            .iter()
            .map(|name| {
                SCENARIOS
                    .iter()
                    .copied()
                    .find(|s| s == name)
                    .with_context(|| {
                        format!("no scenario {name:?}; valid: {}", SCENARIOS.join(", "))
                    })
            })
            .collect::<anyhow::Result<_>>()?
    };
    let variants: Vec<VariantInfo> = if config.variants.is_empty() {
        Variant::ALL.iter().map(|v| v.info()).collect()
    } else {
        config
            .variants
            .iter()
            .map(|name| {
                name.parse::<Variant>().map(Variant::info).map_err(|_| {
                    anyhow::anyhow!(
                        "no variant {name:?}; valid: {}",
                        Variant::names().join(", ")
                    )
                })
            })
            .collect::<anyhow::Result<_>>()?
    };

    let (stack, redis, redis_url) = match &config.target {
        Some(target) => {
            eprintln!(
                "lab: using the stack at {} (it must run up --chaos; redis-restart is skipped)",
                target.url
            );
            let stack = Stack::attach(&target.url, &target.admin_token).await?;
            (stack, None, target.redis_url.clone())
        }
        None => {
            eprintln!(
                "lab: starting redis-server and a chaos-mode stack (2 instances, b's clock {SKEW_MS} ms ahead)"
            );
            let redis = RedisServer::start(None).await?;
            let args: Vec<String> = [
                "--chaos",
                "--instances",
                "2",
                "--clock-skew-ms",
                &format!("0,{SKEW_MS}"),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let stack = Stack::start(&UpOptions {
                redis_url: Some(redis.url()),
                args,
                ..UpOptions::default()
            })
            .await?;
            let url = redis.url();
            (stack, Some(redis), url)
        }
    };
    let store = Store::open(&redis_url)?;
    let mut lab = Lab {
        stack,
        redis,
        redis_url,
        store,
        restarted_nodes: Vec::new(),
    };

    let started = Instant::now();
    let mut cells = Vec::new();
    for scenario in &scenarios {
        for info in &variants {
            let Some(expected) = expected(scenario, info) else {
                continue;
            };
            if *scenario == "redis-restart" && lab.redis.is_none() {
                continue; // the lab cannot restart a Redis it did not start
            }
            if scenario.starts_with("redlock-") && lab.stack.redlock_nodes.len() != 5 {
                // It kills and restarts the nodes of a stack it started.
                eprintln!(
                    "lab: skipping {scenario} / {}: needs the five Redlock nodes of a stack the lab started",
                    info.name
                );
                continue;
            }
            let cell_started = Instant::now();
            let outcome =
                tokio::time::timeout(CELL_TIMEOUT, run_cell(&mut lab, scenario, info)).await;
            let (observed, evidence) = match outcome {
                Ok(Ok(result)) => result,
                Ok(Err(err)) => ("error".to_owned(), format!("{err:#}")),
                Err(_) => (
                    "timeout".to_owned(),
                    format!("did not finish within {CELL_TIMEOUT:?}"),
                ),
            };
            let pass = category(&observed) == category(&expected);
            eprintln!(
                "{} {scenario:<17} {:<12} expected {expected:<40} observed {observed:<20} ({:.1} s) {evidence}",
                if pass { "PASS" } else { "FAIL" },
                info.name,
                cell_started.elapsed().as_secs_f64()
            );
            cells.push(Cell {
                scenario: scenario.to_string(),
                variant: info.name.clone(),
                expected,
                observed,
                pass,
                evidence,
            });
            disarm(&lab).await;
        }
    }
    lab.stack.stop().await;
    if let Some(mut redis) = lab.redis.take() {
        redis.stop().await;
    }
    for node in lab.restarted_nodes.iter_mut() {
        node.stop().await;
    }

    print_matrix(&scenarios, &variants, &cells);
    println!(
        "{} cells in {:.0} s",
        cells.len(),
        started.elapsed().as_secs_f64()
    );
    if let Some(path) = &config.json {
        std::fs::write(
            path,
            serde_json::to_string_pretty(&LabReport {
                cells: cells.clone(),
            })?,
        )
        .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let failed: Vec<&Cell> = cells.iter().filter(|c| !c.pass).collect();
    for cell in &failed {
        eprintln!(
            "CONTRADICTION {} / {}: expected {}, observed {}: {}",
            cell.scenario, cell.variant, cell.expected, cell.observed, cell.evidence
        );
    }
    Ok(failed.is_empty())
}

/// Clears any fault a cell armed but did not trigger.
async fn disarm(lab: &Lab) {
    if let Ok(mut conn) = lab.store.conn().await {
        let _ = chaos::disarm(&mut conn).await;
    }
}

fn print_matrix(scenarios: &[&str], variants: &[VariantInfo], cells: &[Cell]) {
    print!("{:<13}", "");
    for scenario in scenarios {
        print!(" {scenario:<18}");
    }
    println!();
    for info in variants {
        print!("{:<13}", info.name);
        for scenario in scenarios {
            let shown = match cells
                .iter()
                .find(|c| c.variant == info.name && &c.scenario == scenario)
            {
                Some(cell) => format!(
                    "{} {}",
                    if cell.pass { "ok" } else { "XX" },
                    category(&cell.observed)
                ),
                None => "-".to_owned(),
            };
            print!(" {shown:<18}");
        }
        println!();
    }
}

async fn run_cell(
    lab: &mut Lab,
    scenario: &str,
    info: &VariantInfo,
) -> anyhow::Result<(String, String)> {
    let v = info.name.as_str();
    let (observed, evidence) = match scenario {
        "race" => race(lab, info).await?,
        "slow-business" => slow_business(lab, v).await?,
        "crash-after-setnx" => crash_after_setnx(lab, v).await?,
        "pause-holder" => pause_holder(lab, v).await?,
        "kill-instance" => kill_instance(lab, v).await?,
        "lock-vanishes" => lock_vanishes(lab, v).await?,
        "retry-storm" => retry_storm(lab, v).await?,
        "clock-skew" => clock_skew(lab, v).await?,
        "redis-restart" => redis_restart(lab, v).await?,
        "redlock-minority-down" => redlock_minority_down(lab, info).await?,
        "redlock-majority-down" => redlock_majority_down(lab, v).await?,
        "redlock-restart-without-persistence" => restart_without_persistence(lab, v).await?,
        other => bail!("no scenario {other}"),
    };
    Ok((observed.to_owned(), evidence))
}

/// Two instances, 400 buyers, 64 at once, `work_ms=2`, stock 50.
async fn race(lab: &Lab, info: &VariantInfo) -> anyhow::Result<(&'static str, String)> {
    let state = race_load(lab, info).await?;
    Ok(Lab::judged_by_ledger(
        &state,
        lab.overlaps(&info.name).await?,
    ))
}

/// The race's load; the SKU's state after it.
async fn race_load(lab: &Lab, info: &VariantInfo) -> anyhow::Result<StateSnapshot> {
    let config = LoadConfig {
        variants: vec![info.name.clone()],
        stock: Some(50),
        requests: Some(400),
        work_ms: Some(2),
        timeout: Duration::from_secs(60),
        ..LoadConfig::new(&lab.stack.url, Some(lab.stack.token.clone()))
    };
    let api = Api::new(&config.target, config.admin_token.clone())?;
    let target = load::resolve_target(&config.target).await?;
    load::run_variant(&api, &target, &config, info, &Progress::default()).await?;
    lab.state(&info.name).await
}

/// Three buyers, work 600 ms, lease 200 ms, each waiting up to 5 s.
async fn slow_business(lab: &Lab, v: &str) -> anyhow::Result<(&'static str, String)> {
    lab.stack.reset(v, 5).await?;
    let query = format!("/deductStock/{v}?sku={v}&lease_ms=200&work_ms=600&wait_ms=5000");
    let buyers: Vec<_> = (0..3)
        .map(|_| lab.send(&lab.stack.url, query.clone()))
        .collect();
    for buyer in buyers {
        buyer.await?;
    }
    let state = lab.state(v).await?;
    Ok(Lab::judged_by_ledger(&state, lab.overlaps(v).await?))
}

/// A real crash between SETNX and EXPIRE; is a sale possible again?
async fn crash_after_setnx(lab: &mut Lab, v: &str) -> anyhow::Result<(&'static str, String)> {
    lab.stack.reset(v, 10).await?;
    lab.stack
        .chaos(json!({"action": "crash_after_setnx"}))
        .await?;
    // The lease asked for is 1 s, but the crash comes before EXPIRE.
    let (status, _) = lab
        .stack
        .get(&format!(
            "{}/deductStock/{v}?sku={v}&lease_ms=1000",
            lab.stack.url
        ))
        .await;
    let restarted = lab.stack.next_instance(Duration::from_secs(10)).await;
    // Lease + 1 s: any lock with that lease would be free by now.
    let window = Duration::from_millis(2_000);
    let deadline = Instant::now() + window;
    let mut sold = false;
    while Instant::now() < deadline && !sold {
        let (status, _) = lab
            .stack
            .get(&format!("{}/deductStock/{v}?sku={v}", lab.stack.url))
            .await;
        sold = status == 200;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let state = lab.state(v).await?;
    let observed = if !sold && state.lock.no_ttl {
        "deadlock"
    } else {
        "frees"
    };
    let evidence = format!(
        "crashing request answered {status}; instance {} restarted; lock held with no TTL: {}; sold in the {:.0} s after: {}; stuck stock {}",
        restarted.map(|i| i.name).unwrap_or_else(|| "?".into()),
        state.lock.no_ttl,
        window.as_secs_f64(),
        sold,
        state.remaining
    );
    lab.stack
        .chaos(json!({"action": "lock_vanishes", "sku": v}))
        .await?;
    Ok((observed, evidence))
}

/// The holder on instance a freezes (SIGSTOP) for 1.5 s between its last
/// check of the lock and its write, with a 300 ms lease; a buyer on instance b waits for the lock.
async fn pause_holder(lab: &Lab, v: &str) -> anyhow::Result<(&'static str, String)> {
    lab.stack.reset(v, 5).await?;
    lab.stack
        .chaos(json!({"action": "pause_holder", "ms": 1500}))
        .await?;
    let query = format!("/deductStock/{v}?sku={v}&lease_ms=300&work_ms=0&wait_ms=5000");
    if v == "lua" {
        // No lock and no section in Rust: nothing to freeze in the gap.
        let buyers: Vec<_> = (0..10)
            .map(|_| lab.send(&lab.stack.url, query.clone()))
            .collect();
        for buyer in buyers {
            buyer.await?;
        }
        let state = lab.state(v).await?;
        let (observed, evidence) = Lab::judged_by_ledger(&state, Overlaps::default());
        return Ok((
            observed,
            format!("{evidence}; one script, no gap to pause in"),
        ));
    }
    let duel = lab.duel(v, &query, &query, None).await?;
    Ok((
        duel.observed,
        format!(
            "{}; paused holder answered {}, the other {}",
            duel.evidence, duel.holder, duel.newcomer
        ),
    ))
}

/// The holder's instance is killed (SIGKILL) mid-work: how long until the
/// lock frees itself? Lease 1 s; a sale within lease + 1 s passes.
async fn kill_instance(lab: &mut Lab, v: &str) -> anyhow::Result<(&'static str, String)> {
    lab.stack.reset(v, 5).await?;
    let taken = lab.section_entered(v).await?;
    let _holder = lab.send(
        lab.instance(0),
        format!("/deductStock/{v}?sku={v}&lease_ms=1000&work_ms=20000&wait_ms=0"),
    );
    taken.await;
    let victim = lab.stack.instances[0].clone();
    signal(victim.pid, nix::sys::signal::Signal::SIGKILL);
    let killed_at = Instant::now();
    let (status, body) = lab
        .send(
            lab.instance(1),
            format!("/deductStock/{v}?sku={v}&lease_ms=1000&wait_ms=5000"),
        )
        .await?;
    let freed_after = killed_at.elapsed();
    let restarted = lab.stack.next_instance(Duration::from_secs(10)).await;
    let observed = if status == 200 && freed_after <= Duration::from_millis(2_000) {
        "frees"
    } else {
        "stuck"
    };
    Ok((
        observed,
        format!(
            "killed instance {} (pid {}); next sale {} after {:.2} s ({}); restarted: {}",
            victim.name,
            victim.pid,
            status,
            freed_after.as_secs_f64(),
            body["reason"].as_str().unwrap_or("sold"),
            restarted.is_some()
        ),
    ))
}

/// The lock key is deleted while its holder works (1 s of work, 2 s lease);
/// a buyer on the other instance comes right after.
async fn lock_vanishes(lab: &Lab, v: &str) -> anyhow::Result<(&'static str, String)> {
    lab.stack.reset(v, 5).await?;
    let duel = lab
        .duel(
            v,
            &format!("/deductStock/{v}?sku={v}&lease_ms=2000&work_ms=1000&wait_ms=0"),
            &format!("/deductStock/{v}?sku={v}&lease_ms=2000&work_ms=0&wait_ms=0"),
            Some(json!({"action": "lock_vanishes", "sku": v})),
        )
        .await?;
    Ok((
        duel.observed,
        format!(
            "{}; holder answered {}, the newcomer {}",
            duel.evidence, duel.holder, duel.newcomer
        ),
    ))
}

/// Sixteen concurrent retries of one request_id through nginx.
async fn retry_storm(lab: &Lab, v: &str) -> anyhow::Result<(&'static str, String)> {
    lab.stack.reset(v, 5).await?;
    let query = format!("/deductStock/{v}?sku={v}&request_id=storm-1&work_ms=20&wait_ms=5000");
    let retries: Vec<_> = (0..16)
        .map(|_| lab.send(&lab.stack.url, query.clone()))
        .collect();
    let mut answers = std::collections::BTreeMap::<u16, usize>::new();
    for retry in retries {
        *answers.entry(retry.await?.0).or_default() += 1;
    }
    let state = lab.state(v).await?;
    let observed = if state.sold == 1 && state.oversold == 0 {
        "safe"
    } else {
        "oversells"
    };
    Ok((
        observed,
        format!(
            "sold {} (must be 1), replays {}, answers {answers:?}",
            state.sold, state.replays
        ),
    ))
}

/// A holder on instance a (true clock); a buyer on instance b, whose clock
/// runs 5 s ahead, while the lock still has 2 s to live.
async fn clock_skew(lab: &Lab, v: &str) -> anyhow::Result<(&'static str, String)> {
    lab.stack.reset(v, 5).await?;
    let duel = lab
        .duel(
            v,
            &format!("/deductStock/{v}?sku={v}&lease_ms=2000&work_ms=500&wait_ms=0"),
            &format!("/deductStock/{v}?sku={v}&lease_ms=2000&work_ms=0&wait_ms=0"),
            None,
        )
        .await?;
    Ok((
        duel.observed,
        format!(
            "{}; the skewed instance answered {}",
            duel.evidence, duel.newcomer
        ),
    ))
}

/// Redis stops (503s meanwhile) and comes back empty on the same port: how
/// long until a sale works again?
async fn redis_restart(lab: &mut Lab, v: &str) -> anyhow::Result<(&'static str, String)> {
    lab.stack.reset(v, 5).await?;
    let Some(redis) = lab.redis.as_mut() else {
        bail!("the lab can only restart a Redis it started");
    };
    let port = redis.port();
    redis.stop().await;
    let (down, _) = lab
        .stack
        .get(&format!("{}/deductStock/{v}?sku={v}", lab.stack.url))
        .await;
    lab.redis = Some(RedisServer::start(Some(port)).await?);
    let back = Instant::now();
    let mut sold = false;
    while back.elapsed() < Duration::from_secs(5) && !sold {
        if lab.stack.reset(v, 5).await.is_ok() {
            sold = lab
                .stack
                .get(&format!("{}/deductStock/{v}?sku={v}", lab.stack.url))
                .await
                .0
                == 200;
        }
        if !sold {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let observed = if down == 503 && sold {
        "recovers"
    } else {
        "stuck"
    };
    Ok((
        observed,
        format!(
            "while down: {down}; selling again {:.2} s after Redis came back: {sold}",
            back.elapsed().as_secs_f64()
        ),
    ))
}

impl Lab {
    /// Kills Redlock nodes (SIGKILL, by index from 0) and waits until their
    /// ports refuse connections.
    async fn kill_nodes(&self, which: &[usize]) -> anyhow::Result<()> {
        for &i in which {
            let node = self
                .stack
                .redlock_nodes
                .get(i)
                .context("no such Redlock node")?;
            signal(node.pid, nix::sys::signal::Signal::SIGKILL);
        }
        for &i in which {
            let port = self.stack.redlock_nodes[i]
                .port()
                .context("a node's port")?;
            let deadline = Instant::now() + Duration::from_secs(5);
            // A dead process has no event to wait on but its closed port.
            while tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                if Instant::now() > deadline {
                    bail!("Redlock node {} still answers after SIGKILL", i + 1);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        Ok(())
    }

    /// Starts empty redis-servers on the ports of Redlock nodes (a restart
    /// without persistence); the lab owns and stops them.
    async fn restart_nodes(&mut self, which: &[usize]) -> anyhow::Result<()> {
        for &i in which {
            let port = self.stack.redlock_nodes[i]
                .port()
                .context("a node's port")?;
            let server = RedisServer::start(Some(port)).await?;
            self.stack.redlock_nodes[i].pid = server.pid().unwrap_or(0);
            self.restarted_nodes.push(server);
        }
        Ok(())
    }
}

/// Two of the five Redlock nodes are killed; the race runs on the three left.
async fn redlock_minority_down(
    lab: &mut Lab,
    info: &VariantInfo,
) -> anyhow::Result<(&'static str, String)> {
    lab.kill_nodes(&[3, 4]).await?;
    let state = race_load(lab, info).await;
    lab.restart_nodes(&[3, 4]).await?;
    let state = state?;
    let observed = if state.oversold > 0 || state.duplicates > 0 {
        "oversells"
    } else if state.remaining == 0 && state.sold == state.initial {
        "keeps selling"
    } else {
        "stuck"
    };
    Ok((
        observed,
        format!(
            "nodes 4 and 5 of 5 killed, a majority is 3: sold {} of {}, oversold {}, duplicates {}, busy {}",
            state.sold, state.initial, state.oversold, state.duplicates, state.busy
        ),
    ))
}

/// Three of the five Redlock nodes are killed: busy with a reason; after
/// they come back (empty), how long until a sale works again?
async fn redlock_majority_down(lab: &mut Lab, v: &str) -> anyhow::Result<(&'static str, String)> {
    lab.stack.reset(v, 5).await?;
    lab.kill_nodes(&[2, 3, 4]).await?;
    let base = lab.stack.url.clone();
    let url = |wait: u64| format!("{base}/deductStock/{v}?sku={v}&wait_ms={wait}");
    let answer =
        |(status, body): (u16, Value)| (status, body["reason"].as_str().unwrap_or("").to_owned());
    let fast = answer(lab.stack.get(&url(0)).await);
    let waited = answer(lab.stack.get(&url(500)).await);
    lab.restart_nodes(&[2, 3, 4]).await?;
    let back = Instant::now();
    let mut sold = false;
    while back.elapsed() < Duration::from_secs(5) && !sold {
        sold = lab.stack.get(&url(1000)).await.0 == 200;
    }
    let recovered_after = back.elapsed();
    let state = lab.state(v).await?;
    let no_quorum = |(status, reason): &(u16, String)| *status == 429 && reason == "no_quorum";
    let observed = if state.oversold > 0 {
        "oversells"
    } else if no_quorum(&fast) && no_quorum(&waited) && sold {
        "busy"
    } else {
        "stuck"
    };
    Ok((
        observed,
        format!(
            "nodes 3, 4 and 5 of 5 killed: answered {} {} (wait_ms=0) and {} {} (wait_ms=500); nodes back empty, selling again after {:.2} s: {sold}; oversold {}",
            fast.0,
            fast.1,
            waited.0,
            waited.1,
            recovered_after.as_secs_f64(),
            state.oversold
        ),
    ))
}

/// Redlock: nodes 4 and 5 are down when the holder (instance a, 30 s lease)
/// takes the lock on nodes 1-3 and freezes in its section; node 3 restarts
/// empty and 4 and 5 come back, so instance b finds a majority (3, 4, 5)
/// while the holder still has most of its lease. `fenced`: its one Redis
/// forgets the lock the same way (the key is deleted) under a frozen holder.
async fn restart_without_persistence(
    lab: &mut Lab,
    v: &str,
) -> anyhow::Result<(&'static str, String)> {
    lab.stack.reset(v, 5).await?;
    const FROZEN_MS: u64 = 4_000;
    lab.stack
        .chaos(json!({"action": "pause_holder", "ms": FROZEN_MS}))
        .await?;
    let holder = format!("/deductStock/{v}?sku={v}&work_ms=0&wait_ms=0");
    let newcomer = format!("/deductStock/{v}?sku={v}&work_ms=0&wait_ms=2500");
    if v == "fenced" {
        let duel = lab
            .duel(
                v,
                &holder,
                &newcomer,
                Some(json!({"action": "lock_vanishes", "sku": v})),
            )
            .await?;
        return Ok((
            duel.observed,
            format!(
                "the lock was forgotten (deleted, as a restart without persistence does) under a frozen holder: {}; holder answered {}, the newcomer {}",
                duel.evidence, duel.holder, duel.newcomer
            ),
        ));
    }
    lab.kill_nodes(&[3, 4]).await?;
    let entered = lab.section_entered(v).await?;
    let first = lab.send(lab.instance(0), holder);
    entered.await;
    // The holder has nodes 1-3 and is frozen. Node 3 restarts empty; 4 and 5 return.
    lab.kill_nodes(&[2]).await?;
    lab.restart_nodes(&[2, 3, 4]).await?;
    let second = lab.send(lab.instance(1), newcomer).await?;
    let first = first.await?;
    let state = lab.state(v).await?;
    let (observed, evidence) = Lab::judged_by_ledger(&state, lab.overlaps(v).await?);
    let answer = |(status, body): &(u16, Value)| {
        format!("{status} {}", body["reason"].as_str().unwrap_or(""))
    };
    Ok((
        observed,
        format!(
            "holder on a took nodes 1-3 (4 and 5 down), froze {} s with a 30 s lease; node 3 restarted empty, 4 and 5 came back; b answered {}, the holder {}; {evidence}",
            FROZEN_MS / 1000,
            answer(&second),
            answer(&first)
        ),
    ))
}
