//! `stocklock soak`: the nemesis. Every variant sells at once under load
//! (a fresh SKU each round, buyers who retry what settles nothing with the
//! same request id) while faults drawn by a seed strike every few seconds,
//! several at once now and then: the chaos actions, instances and servers
//! killed or frozen, an instance cut off from Redis. Each round is judged
//! when it ends ([`judge`]) against what its variant claims for the faults
//! that struck it, and by the history checker ([`crate::history`]) from
//! what its buyers were told, recorded on their side ([`second`]): the two
//! must agree on safety. Once the faults stop, every variant must sell again,
//! the order books must match and Redis must be back to what the SKUs
//! need. The same seed plays the same fault schedule again.

mod args;
pub mod books;
pub mod buyers;
mod checker;
pub mod evidence;
pub mod faults;
pub mod judge;
mod nemesis;
mod processes;
mod report;
pub mod returns;
pub mod second;
mod sellers;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::sync::Mutex;

pub use self::args::SoakArgs;
use self::args::rerun_line;
use self::buyers::Shared;
use self::checker::Checker;
use self::faults::Kind;
use self::nemesis::Nemesis;
use crate::harness::stack::{Stack, UpOptions};
use crate::store::Store;
use crate::variants::Variant;
use crate::wire::SoakReport;

/// No sale for this long with stock left, and no fault playing for as
/// long: the round stalled.
pub const STALL: Duration = Duration::from_secs(20);
/// Once the faults stop, every variant must sell again within this.
pub const RECOVER_WITHIN: Duration = Duration::from_secs(60);

/// `stocklock soak`: `Ok(false)` (exit 2) when a claim was broken.
pub async fn run(args: SoakArgs) -> anyhow::Result<bool> {
    crate::telemetry::init("error");
    // Its stack and the servers it starts again die with it.
    crate::up::process::children_die_with_us()?;
    if !(args.minutes > 0.0 && args.minutes <= 24.0 * 60.0) {
        bail!(
            "--minutes must be more than 0 and at most a day, got {}",
            args.minutes
        );
    }
    if args.buyers == 0 || args.buyers > 16 || !(1..=10_000).contains(&args.stock) {
        bail!("--buyers must be 1 to 16 and --stock 1 to 10000");
    }
    let (stack, redis_url) = match &args.target.target {
        Some(url) => {
            let token = args.target.admin_token.clone().unwrap_or_default();
            let redis = args.target.redis_url.clone().unwrap_or_default();
            (Stack::attach(url, &token).await?, redis)
        }
        None => {
            let mut up = vec!["--store-relays".to_owned()];
            if !args.no_persist {
                up.push("--persist".to_owned());
            }
            if let Some(within) = args.pay_within {
                up.push(format!("--pay-within={}ms", within.as_millis()));
            }
            let stack = Stack::start(&UpOptions {
                args: up,
                echo: args.echo,
                ..Default::default()
            })
            .await?;
            let redis = stack.redis_url.clone().context("up printed no Redis URL")?;
            (stack, redis)
        }
    };
    let persist = args.target.target.is_some() || !args.no_persist;
    let store = Store::open(&redis_url).context("the stack's Redis")?;
    let client = stack.client.clone();
    let postgres_url = stack.postgres.as_ref().map(|p| p.url.clone());
    let variants = if args.variant.is_empty() {
        Variant::ALL.to_vec()
    } else {
        args.variant.clone()
    };
    let lock_skus = Arc::new(StdMutex::new(Vec::new()));
    let stack = Arc::new(Mutex::new(stack));
    let shared = Arc::new(Shared {
        client: client.clone(),
        started: Instant::now(),
        stop: Default::default(),
        requests: Default::default(),
        sold: Default::default(),
        unknowns: Default::default(),
        unknowns_resolved: Default::default(),
        last_sale: Default::default(),
        faults_playing: Default::default(),
        healed_ms: Default::default(),
    });
    let nemesis = Arc::new(Nemesis::new(
        shared.clone(),
        stack.clone(),
        store.clone(),
        lock_skus.clone(),
    ));
    let asked = if args.faults.is_empty() {
        Kind::ALL.to_vec()
    } else {
        args.faults.clone()
    };
    let mut kinds = Vec::new();
    for kind in asked {
        if nemesis.can(kind).await {
            kinds.push(kind);
        } else {
            println!(
                "fault {}: nothing in this stack for it to hit; left out",
                kind.name()
            );
        }
    }
    let length = Duration::from_secs_f64(args.minutes * 60.0);
    let plan = faults::schedule(args.seed, &kinds, args.cycle, length);
    println!(
        "soak: seed {}, {} min, {} faults planned of {} kinds, {} variants, {} buyers each, {} units a round",
        args.seed,
        args.minutes,
        plan.len(),
        kinds.len(),
        variants.len(),
        args.buyers,
        args.stock
    );
    println!("follow it on the dashboard: {}/soak", client.base());
    let checker = Arc::new(Checker {
        pending: StdMutex::new(Vec::new()),
        found: Default::default(),
        client: client.clone(),
        persist,
        stock: args.stock,
        rerun: rerun_line(&args),
        books: books::Books::new(postgres_url, store.clone(), persist),
        history: second::HistoryFile::create(args.history.as_deref())?,
        pay_within: match args.target.target {
            Some(_) => Duration::ZERO,
            None => (args.pay_within).unwrap_or(crate::orders::DEFAULT_PAY_WITHIN),
        },
        started: shared.started,
    });
    let sellers = sellers::spawn(&args, &variants, &shared, &checker, &lock_skus);
    let status = report::Status::new(store.clone(), args.seed, args.minutes);
    let mut strikes = Vec::new();
    let started = shared.started;
    let mut ticker = tokio::time::interval(Duration::from_millis(250));
    let mut plan = plan.into_iter().peekable();
    let checkpoint = |checker: Arc<Checker>, nemesis: Arc<Nemesis>, now_s: f64| async move {
        let (faults, active) = nemesis.known();
        checker.checkpoint(&faults, Some(now_s), active).await;
    };
    let mut checking = tokio::spawn(async {});
    let mut tick = 0u64;
    while started.elapsed() < length {
        ticker.tick().await;
        // A stack whose `up` ended is gone with everything it started:
        // nothing more can be sold or judged (its buyers would ask for ever).
        if let Some(status) = stack.lock().await.gone() {
            shared.stop.store(true, Ordering::Relaxed);
            bail!(
                "the stack stopped {:.0} s into the soak (stocklock up exited: {status}); \
                 run with --echo to see why",
                started.elapsed().as_secs_f64()
            );
        }
        while plan.peek().is_some_and(|p| p.at <= started.elapsed()) {
            if let Some(fault) = plan.next() {
                strikes.push(tokio::spawn(nemesis.clone().strike(fault)));
            }
        }
        // The page polls once a second: the status need not be rewritten
        // (the fault log and the violations copied) at every tick.
        tick += 1;
        if tick.is_multiple_of(4) {
            let found = checker.found.lock().await.violations.clone();
            status.write("faults", &shared, &nemesis, &found).await;
        }
        if checking.is_finished() {
            let now_s = started.elapsed().as_secs_f64();
            checking = tokio::spawn(checkpoint(checker.clone(), nemesis.clone(), now_s));
        }
    }
    for strike in strikes {
        let _ = strike.await;
    }
    // The faults are over: every variant must sell again.
    let quiet_ms = shared.ms();
    let recover_by = Instant::now() + RECOVER_WITHIN;
    while Instant::now() < recover_by && !shared.all_sold_since(&variants, quiet_ms) {
        status.write("recovering", &shared, &nemesis, &[]).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let recovered: Vec<Variant> = variants
        .iter()
        .copied()
        .filter(|v| shared.all_sold_since(&[*v], quiet_ms))
        .collect();
    shared.stop.store(true, Ordering::Relaxed);
    for seller in sellers {
        let _ = seller.await;
    }
    let _ = checking.await;
    status.write("judging", &shared, &nemesis, &[]).await;
    nemesis.stop().await;
    let (faults, _) = nemesis.known();
    checker.checkpoint(&faults, None, None).await;
    let end_s = shared.ms() as f64 / 1e3;
    for variant in variants.iter().filter(|v| !recovered.contains(v)) {
        let what = format!(
            "sold nothing in the {} s after the faults stopped",
            RECOVER_WITHIN.as_secs()
        );
        let window = (quiet_ms as f64 / 1e3, end_s);
        checker.add(variant.name(), "", what, window).await;
    }
    let mut found = std::mem::take(&mut *checker.found.lock().await);
    // What the SKUs still need: those kept as evidence, whole; the order
    // SKUs' books; the stack's own keys.
    let unmatched = found.orders.len() as u64;
    let keys_allowed = (found.kept + unmatched) * report::KEYS_PER_SKU
        + found.orders_matched * report::BOOK_KEYS
        + report::STACK_KEYS;
    let redis = report::redis_at_end(&store, keys_allowed, &found.deadlocked).await;
    for what in report::redis_wrong(&redis) {
        found
            .violations
            .push(checker::bare("", "", what, (0.0, end_s), &checker.rerun));
    }
    if let Some(path) = &args.json {
        report::draw_timelines(&client, &mut found.violations, path).await;
    }
    let soak = SoakReport {
        seed: args.seed,
        minutes: args.minutes,
        kinds: kinds.iter().map(|k| k.name().to_owned()).collect(),
        cycle: args.cycle,
        persist,
        elapsed_s: shared.started.elapsed().as_secs_f64(),
        requests: shared.requests.load(Ordering::Relaxed),
        sold: shared.sold.load(Ordering::Relaxed),
        faults_by_kind: report::by_kind(&faults),
        recovery: report::recovery(&mut found.sales, &faults, quiet_ms),
        unknowns: found.unknowns.clone(),
        faults,
        variants: variants
            .iter()
            .map(|v| {
                let mut entry = found.variants.remove(v).unwrap_or_default();
                entry.variant = v.name().to_owned();
                entry
            })
            .collect(),
        violations: found.violations,
        redis,
        orders_matched: found.orders_matched,
        orders: found.orders,
        history_file: args.history.as_ref().map(|p| p.display().to_string()),
        judged_late_s: found.judged_late_ms as f64 / 1e3,
    };
    status
        .write("done", &shared, &nemesis, &soak.violations)
        .await;
    report::print(&soak);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&soak)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    drop(nemesis);
    if let Ok(stack) = Arc::try_unwrap(stack) {
        stack.into_inner().stop().await;
    }
    Ok(soak.violations.is_empty())
}
