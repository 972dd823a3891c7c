//! The lab's runner: which cells to play, on which stack, and the report.
//!
//! The main stack (a Redis and a chaos-mode stack of two instances, or the
//! `--target`) is started only when a chosen scenario plays on it: the
//! failover and order scenarios start a stack of their own for each cell.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;

use super::report::{self, Cell, LabReport};
use super::scenario::Scenario;
use super::{CELL_TIMEOUT, Lab, LabConfig, Target};
use crate::harness::stack::{Stack, UpOptions};
use crate::history::Recorder;
use crate::judge::second::second_opinion;
use crate::judge::{Judgement, Observed, said_of};
use crate::said;
use crate::store::Store;
use crate::up::redis::RedisServer;
use crate::variants::Variant;
use crate::wire::Said;

/// Plays `scenario` against `variant` and judges what it saw: on a stack of
/// its own (the failover and order scenarios, [`Scenario::own_stack`]), or
/// on the lab's main stack (`lab`; `None` when no chosen scenario needs it).
/// Every request its buyers send, and every reset, goes into `recorder`.
async fn play(
    scenario: Scenario,
    lab: Option<&mut Lab>,
    variant: Variant,
    recorder: &Recorder,
) -> anyhow::Result<Judgement> {
    let own = scenario.own_stack(variant);
    match scenario {
        Scenario::Failover | Scenario::FailoverWaitEarly | Scenario::FailoverWait if own => {
            super::failover::play(scenario, variant, recorder).await
        }
        Scenario::CrashBeforeEnqueue
        | Scenario::WorkerCrashBeforeAck
        | Scenario::PostgresRestart
        | Scenario::ReservationExpiry
        | Scenario::RedisDataLoss
            if own =>
        {
            super::orders::play(scenario, variant, recorder).await
        }
        _ => {
            let lab =
                lab.ok_or_else(|| anyhow::anyhow!("{scenario} needs the lab's main stack"))?;
            lab.stack.client = lab.stack.client.recording(recorder.clone());
            let judgement = scenario.play(lab, variant).await?;
            // The books after the cell, read where the stack's truth is.
            for sku in recorder.skus() {
                lab.client().read_books(&sku).await?;
            }
            Ok(judgement)
        }
    }
}

/// Runs the lab and prints the matrix; `Ok(false)` if any cell failed
/// (a contradiction, or an inconclusive cell).
pub async fn run(config: LabConfig) -> anyhow::Result<bool> {
    let scenarios = if config.scenarios.is_empty() {
        Scenario::ALL.to_vec()
    } else {
        config.scenarios.clone()
    };
    let variants: Vec<Variant> = if config.variants.is_empty() {
        Variant::ALL.to_vec()
    } else {
        config
            .variants
            .iter()
            .map(|name| {
                name.parse::<Variant>().map_err(|_| {
                    anyhow::anyhow!(
                        "no variant {name:?}; valid: {}",
                        Variant::names().join(", ")
                    )
                })
            })
            .collect::<anyhow::Result<_>>()?
    };

    if let Some(prefix) = &config.sku_prefix {
        if config.target.is_none() {
            anyhow::bail!("--sku-prefix plays on a running stack: it needs --target");
        }
        if let Some(s) = scenarios.iter().find(|s| !s.per_sku()) {
            anyhow::bail!(
                "--sku-prefix plays only the scenarios that touch nothing but their SKU ({}); {s} does more",
                Scenario::ALL
                    .iter()
                    .filter(|s| s.per_sku())
                    .map(|s| s.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        for v in &variants {
            crate::knobs::Sku::parse(&format!("{prefix}{v}"))
                .map_err(|err| anyhow::anyhow!("--sku-prefix {prefix:?}: {err}"))?;
        }
    }
    let needs_main_stack = scenarios.iter().any(|s| {
        variants
            .iter()
            .any(|&v| !s.own_stack(v) && s.claim(v).applies())
    });
    // Every cell that applies, in the matrix's order, taken by `jobs`
    // lanes, each with a main stack of its own (a target is one stack:
    // one lane).
    let queue: Vec<(Scenario, Variant)> = (scenarios.iter())
        .flat_map(|&s| variants.iter().map(move |&v| (s, v)))
        .filter(|&(s, v)| s.claim(v).applies())
        .collect();
    // The model's verdicts, computed while the first cells play.
    crate::check::warm(queue.iter().map(|&(s, v)| (v, s)).collect());
    let jobs = match config.target {
        Some(_) => 1,
        None => config.jobs.clamp(1, MAX_JOBS),
    };
    let next = std::sync::atomic::AtomicUsize::new(0);
    let started = Instant::now();
    let lanes = (0..jobs).map(|_| lane(&config, needs_main_stack, &queue, &next));
    let mut played: Vec<(usize, Cell, String)> = Vec::new();
    for lane in futures_util::future::join_all(lanes).await {
        played.extend(lane?);
    }
    played.sort_by_key(|(at, _, _)| *at);
    // Every cell's history, one after another (their SKUs named
    // `scenario/variant/sku`), for `--history`.
    let history: String = played.iter().map(|(_, _, h)| h.as_str()).collect();
    let cells: Vec<Cell> = played.into_iter().map(|(_, cell, _)| cell).collect();
    report::print_matrix(&scenarios, &variants, &cells);
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
    if let Some(path) = &config.history {
        std::fs::write(path, &history)
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("lab: every cell's history in {}", path.display());
    }
    report::print_failures(&cells);
    Ok(cells.iter().all(|c| c.pass))
}

/// The most lanes `--jobs` runs (each a stack: Redis, PostgreSQL, two
/// instances, nginx).
pub(super) const MAX_JOBS: usize = 4;

/// One lane of the lab: a main stack of its own (when a chosen cell needs
/// one), playing the queue's next cell until none is left. Each cell
/// played, with its place in the queue and its history.
async fn lane(
    config: &LabConfig,
    needs_main_stack: bool,
    queue: &[(Scenario, Variant)],
    next: &std::sync::atomic::AtomicUsize,
) -> anyhow::Result<Vec<(usize, Cell, String)>> {
    let mut lab = match needs_main_stack {
        true => {
            let prefix = config.sku_prefix.as_deref().unwrap_or_default();
            Some(start(config.target.as_ref(), config.timelines.clone(), prefix).await?)
        }
        false => None,
    };
    let mut cells = Vec::new();
    loop {
        let at = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let Some(&(scenario, variant)) = queue.get(at) else {
            break;
        };
        if let Some(why) = lab
            .as_ref()
            .and_then(|lab| lab.cannot_play(scenario, variant))
        {
            eprintln!("lab: skipping {scenario} / {variant}: {why}");
            continue;
        }
        let recorder = Recorder::prefixed(&format!("{scenario}/{variant}/"));
        let cell = cell(scenario, variant, lab.as_mut(), &recorder).await?;
        cells.push((at, cell, recorder.text()));
    }
    if let Some(mut lab) = lab {
        lab.stack.stop().await;
        if let Some(mut redis) = lab.redis.take() {
            redis.stop().await;
        }
        for node in lab.restarted_nodes.iter_mut() {
            node.stop().await;
        }
    }
    Ok(cells)
}

/// Plays one cell (on `lab`, the lane's main stack, or on a stack of its
/// own) and judges it: the lab's judge, the history checker's second
/// opinion, and the model's verdict beside them.
async fn cell(
    scenario: Scenario,
    variant: Variant,
    mut lab: Option<&mut Lab>,
    recorder: &Recorder,
) -> anyhow::Result<Cell> {
    let claim = scenario.claim(variant);
    if let Some(lab) = lab.as_deref_mut() {
        lab.cell = format!("{scenario}-{variant}");
    }
    let cell_started = Instant::now();
    let playing = play(scenario, lab.as_deref_mut(), variant, recorder);
    let judgement = match tokio::time::timeout(CELL_TIMEOUT, playing).await {
        Ok(Ok(judgement)) => judgement,
        Ok(Err(err)) => Judgement {
            observed: Observed::Error,
            evidence: Said::same(format!("{err:#}")),
        },
        Err(_) => Judgement {
            observed: Observed::Error,
            evidence: said!(
                "did not finish within {CELL_TIMEOUT:?}",
                "没有在 {CELL_TIMEOUT:?} 内完成"
            ),
        },
    };
    if let Some(lab) = &lab {
        lab.tidy(scenario).await;
    }
    let model = crate::check::check(variant, scenario);
    let second = second_opinion(recorder, judgement.observed);
    let mut cell = Cell::new(scenario, variant, &claim, judgement, model.as_ref());
    cell.set_second_opinion(second);
    let dir = lab.as_ref().and_then(|lab| lab.timelines.as_ref());
    if let (Some(dir), Some(model)) = (dir, &model) {
        // The checker's shortest way it happens (or the witness its
        // verdict rests on), beside the live run.
        let path = dir.join(format!("{scenario}-{variant}-model.html"));
        if crate::check::draw::write(model, &path)? {
            let what = match model.broken {
                Some(_) => said!("trace", "反例轨迹"),
                None => said!("witness", "见证"),
            };
            let path = path.display();
            cell.add_evidence(&said_of!(
                "; the model's {}: {path}",
                ";模型的{}:{path}";
                what
            ));
        }
    }
    eprintln!("{}", cell.line(cell_started.elapsed().as_secs_f64()));
    Ok(cell)
}

/// The stack to play on: `target`, or a Redis and a chaos-mode stack of
/// the lab's own. Every instance's clock is true; only `clock-skew` moves
/// one, for its own cells.
async fn start(
    target: Option<&Target>,
    timelines: Option<PathBuf>,
    prefix: &str,
) -> anyhow::Result<Lab> {
    if let Some(dir) = &timelines {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let (stack, redis, redis_url) = match target {
        Some(target) => {
            eprintln!(
                "lab: using the stack at {} (it must run up --chaos; redis-restart is skipped)",
                target.url
            );
            let stack = Stack::attach(&target.url, &target.admin_token).await?;
            (stack, None, target.redis_url.clone())
        }
        None => {
            eprintln!("lab: starting redis-server and a chaos-mode stack (2 instances)");
            let redis = RedisServer::start(None).await?;
            // PostgreSQL for the pg-* variants' stock, when it is installed
            // (their cells are skipped without it); the orders' scenarios
            // run stacks of their own.
            let postgres = if crate::up::postgres::installed() {
                "on"
            } else {
                "off"
            };
            let stack = Stack::start(&UpOptions {
                redis_url: Some(redis.url()),
                args: ["--chaos", "--instances", "2", "--orders", postgres]
                    .map(str::to_owned)
                    .to_vec(),
                ..UpOptions::default()
            })
            .await?;
            let url = redis.url();
            (stack, Some(redis), url)
        }
    };
    let store = Store::open(&redis_url)?;
    Ok(Lab {
        stack,
        redis,
        redis_url,
        store,
        restarted_nodes: Vec::new(),
        deaths: 0,
        timelines,
        lasts: target.is_some(),
        cell: String::new(),
        prefix: prefix.to_owned(),
    })
}
