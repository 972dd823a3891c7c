//! The command line: `stocklock serve`, `up`, `load`, `bench`, `compare`,
//! `reconcile`, `lab`, `check`, `replay`, `explore` and `soak` (and the hidden
//! `resume` of chaos mode's pauses and `relay`, a relay process of `up`).
//!
//! `load`, `bench` and `up` parse into their config types ([`LoadConfig`],
//! [`BenchConfig`], [`UpConfig`]); shared values are parsed in [`crate::args`].

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::LazyLock;

use clap::{Parser, Subcommand};

use crate::load::LoadConfig;
use crate::load::bench::BenchConfig;
use crate::telemetry;
use crate::up::{self, UpConfig};
use crate::variants::Variant;

mod serve;
pub use serve::ServeArgs;

/// The top-level help, naming every variant from [`Variant::ALL`] so that
/// a new one is never left out.
static ABOUT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "A flash-sale stock protection lab: the same sale behind each of {} protections ({}), \
         on real Redis behind real nginx.",
        Variant::ALL.len(),
        Variant::names().join(", ")
    )
});

#[derive(Parser, Debug)]
#[command(name = "stocklock", version, about = ABOUT.as_str(), long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run one instance: the HTTP API on one port, against one Redis.
    Serve(ServeArgs),
    /// Run the whole stack on this machine: redis-server, N instances and
    /// nginx in front, supervised until Ctrl-C.
    Up(UpConfig),
    /// Hammer /deductStock/{variant} on a running stack and judge the result
    /// from its ledger: SAFE, OVERSOLD n, DUPLICATES n, STUCK or LEDGER_BROKEN n.
    Load(LoadConfig),
    /// Measure costs side by side on a running stack: our generator vs oha,
    /// lua vs /healthz, what the timeline costs lua, sold-out answers,
    /// watchdog vs the lock hand-off ceiling, Redlock, memory.
    Bench(BenchConfig),
    /// Article 000's lock-store table, measured on a stack of its own:
    /// uncontended lock pairs/s per store (Redis, Redlock, etcd,
    /// ZooKeeper), contended sales/s with p50/p99 through nginx, and each
    /// store's failover verdict.
    Compare(crate::compare::CompareConfig),
    /// Compare the Redis ledger with the orders in PostgreSQL, per SKU: units
    /// sold with no order (lost), orders with no sale (phantom), units
    /// ordered twice, units returned twice, and orders of epochs the ledger
    /// lost (LEDGER_LOST: Redis lost its data). Exit 0 only when all match.
    Reconcile(crate::reconcile::ReconcileArgs),
    /// Run the failure scenarios end to end on a stack of its own and print
    /// the teaching matrix: expected vs observed, with the evidence.
    Lab(crate::lab::LabArgs),
    Check(crate::check::CheckArgs),
    /// Replay the checker's counterexample of one cell on a live stack of
    /// its own, step for step through the gates, and judge the live ledger.
    Replay(crate::replay::ReplayArgs),
    /// Run schedules of the real code chosen at random (or by PCT) on a
    /// live stack of its own, with the scenario's faults, and judge each.
    Explore(crate::explore::ExploreArgs),
    /// The nemesis: random faults under load on every variant, judged from the history.
    Soak(crate::soak::SoakArgs),
    /// The independent judge: decide whether a recorded history (what the
    /// clients of a run were told) fits one sequential spec of a stock.
    #[command(subcommand)]
    History(crate::history::HistoryCommand),
    /// (internal) SIGCONT to PID after a delay (chaos mode's pause).
    #[command(hide = true)]
    Resume {
        #[arg(long)]
        pid: u32,
        #[arg(long)]
        after_ms: u64,
    },
    /// (internal) The relay of `up --replica` and `--store-relays`: a TCP
    /// forwarder from LISTEN to TO, its own process (SIGSTOP holds its bytes).
    #[command(hide = true)]
    Relay {
        #[arg(long)]
        listen: SocketAddr,
        #[arg(long)]
        to: SocketAddr,
    },
    /// (internal) How `up` owns its children: `__child`, `__guard-group`.
    #[command(flatten)]
    Owned(up::process::Owned),
}

/// Parses the command line and runs it.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::History(command) = cli.command {
        // No runtime, no tracing: it reads a file and decides.
        return crate::history::main(command);
    }
    if let Command::Owned(owned) = &cli.command {
        return owned.run(); // an exec or a wait: no runtime
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Command::Serve(ServeArgs {
        worker_threads: Some(n),
        ..
    }) = &cli.command
    {
        builder.worker_threads(n.get());
    }
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("stocklock: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.command)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(2),
        Err(err) => {
            eprintln!("stocklock: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs a command; `Ok(false)` is a run that worked but found what `--check` refuses.
async fn run(command: Command) -> anyhow::Result<bool> {
    match command {
        Command::Serve(args) => serve::serve(args).await.map(|()| true),
        Command::Lab(args) => {
            telemetry::init("error");
            let lesson = args.lesson.clone().zip(args.target.redis_url.clone());
            // A lesson's cells are read back from a JSON file of our own.
            let dir = lesson.as_ref().map(|_| tempfile::tempdir()).transpose()?;
            let json = match &dir {
                Some(dir) => Some(dir.path().join("lab.json")),
                None => args.json,
            };
            let ran = crate::lab::run(crate::lab::LabConfig {
                scenarios: args.scenarios,
                variants: args.variant,
                json: json.clone(),
                timelines: args.timelines,
                history: args.history,
                jobs: usize::from(args.jobs),
                sku_prefix: args.sku_prefix.clone(),
                target: match (
                    args.target.target,
                    args.target.admin_token,
                    args.target.redis_url,
                ) {
                    (Some(url), Some(admin_token), Some(redis_url)) => Some(crate::lab::Target {
                        url,
                        admin_token,
                        redis_url,
                    }),
                    _ => None,
                },
            })
            .await;
            let Some((id, redis_url)) = lesson else {
                return ran;
            };
            let cells = ran.and_then(|_| {
                let path = json.unwrap_or_default();
                let bytes = std::fs::read(&path)?;
                Ok(serde_json::from_slice::<crate::lab::LabReport>(&bytes)?.cells)
            });
            crate::lessons::finish(&redis_url, &id, args.seat.as_deref(), cells).await?;
            Ok(true)
        }
        Command::Check(args) => crate::check::report::run(args),
        Command::Replay(args) => {
            telemetry::init("error");
            // Its Redis and its stack die with it, however it dies.
            up::process::children_die_with_us()?;
            crate::replay::run(args).await
        }
        Command::Explore(args) => {
            telemetry::init("error");
            up::process::children_die_with_us()?;
            crate::explore::run(args).await
        }
        Command::Soak(args) => crate::soak::run(args).await,
        Command::Reconcile(args) => {
            telemetry::init("warn");
            crate::reconcile::run(args).await
        }
        Command::Resume { pid, after_ms } => {
            crate::chaos::resume(pid, std::time::Duration::from_millis(after_ms));
            Ok(true)
        }
        Command::Relay { listen, to } => up::relay::run(listen, to).await.map(|()| true),
        Command::Owned(_) | Command::History(_) => {
            anyhow::bail!("`main` runs it before any runtime")
        }
        Command::Load(config) => {
            telemetry::init("warn");
            crate::load::run(config).await
        }
        Command::Bench(config) => {
            telemetry::init("warn");
            crate::load::bench::run(config).await.map(|()| true)
        }
        Command::Compare(config) => {
            telemetry::init("warn");
            crate::compare::run(config).await.map(|()| true)
        }
        Command::Up(config) => {
            telemetry::init("info");
            up::run(config).await.map(|()| true)
        }
    }
}
