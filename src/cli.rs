//! The command line: `stocklock serve` and `stocklock up`.

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::server::{Application, ServeConfig};
use crate::telemetry;
use crate::up::{self, UpConfig};
use crate::variants::Variant;

#[derive(Parser, Debug)]
#[command(
    name = "stocklock",
    version,
    about = "A flash-sale stock protection lab: the same sale behind no lock, a process mutex, \
             SETNX, a token lock, a watchdog lock, or one Lua script, on real Redis behind real nginx.",
    long_about = None
)]
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
    Up(UpArgs),
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free one; the line
    /// `listening on http://ADDR` on stdout says which).
    #[arg(long, default_value = "127.0.0.1:3000", env = "STOCKLOCK_LISTEN")]
    pub listen: SocketAddr,
    /// The Redis that holds stock, ledger and locks.
    #[arg(
        long,
        default_value = "redis://127.0.0.1:6379",
        env = "STOCKLOCK_REDIS_URL"
    )]
    pub redis_url: String,
    /// This instance's name, reported in every answer.
    #[arg(long, env = "STOCKLOCK_INSTANCE")]
    pub instance: Option<String>,
    /// Token for /api/admin/* (Authorization: Bearer TOKEN). A random one is
    /// generated and printed when unset.
    #[arg(long, env = "STOCKLOCK_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// The variant served at /deductStock with no name.
    #[arg(long, default_value = "lua", value_parser = parse_variant, env = "STOCKLOCK_DEFAULT_VARIANT")]
    pub default_variant: Variant,
    /// Give the lab's SKUs (00001 and one per variant) this much stock at
    /// start-up when they have none (what `up --stock` does; for containers).
    #[arg(long, env = "STOCKLOCK_SEED_STOCK")]
    pub seed_stock: Option<i64>,
    /// Stop when standard input closes (how `up` makes sure no instance
    /// outlives it).
    #[arg(long, hide = true)]
    pub exit_with_stdin: bool,
}

#[derive(Args, Debug)]
pub struct UpArgs {
    /// Port nginx listens on: the one URL users and load generators hit.
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Address nginx binds (0.0.0.0 to let a workshop's other machines in;
    /// /api/admin/ stays loopback-only either way).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// How many instances to run behind nginx.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=26))]
    pub instances: u16,
    /// Use this Redis instead of starting one.
    #[arg(long, env = "STOCKLOCK_REDIS_URL")]
    pub redis_url: Option<String>,
    /// Port for the redis-server `up` starts (default: a free one).
    #[arg(long, conflicts_with = "redis_url")]
    pub redis_port: Option<u16>,
    /// Stock given to every SKU the lab uses (00001 and one per variant) when
    /// it has none yet.
    #[arg(long, default_value_t = 50)]
    pub stock: i64,
    /// Admin token; generated and printed when unset.
    #[arg(long, env = "STOCKLOCK_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// The variant served at /deductStock with no name.
    #[arg(long, default_value = "lua", value_parser = parse_variant)]
    pub default_variant: Variant,
}

fn parse_variant(name: &str) -> Result<Variant, String> {
    name.parse().map_err(|_| {
        format!(
            "no variant {name:?}; valid: {}",
            Variant::names().join(", ")
        )
    })
}

/// A random admin token: 128 bits, hex.
pub fn generate_token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Parses the command line and runs it.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("stocklock: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run(cli.command));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("stocklock: {err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve(args) => serve(args).await,
        Command::Up(args) => {
            telemetry::init("info");
            up::run(UpConfig {
                port: args.port,
                host: args.host,
                instances: args.instances,
                redis_url: args.redis_url,
                redis_port: args.redis_port,
                stock: crate::knobs::parse_stock(args.stock)?,
                admin_token: args.admin_token.unwrap_or_else(generate_token),
                default_variant: args.default_variant,
            })
            .await
        }
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    telemetry::init("info");
    let instance = args
        .instance
        .unwrap_or_else(|| format!("pid{}", std::process::id()));
    let admin_token = match args.admin_token {
        Some(token) if !token.is_empty() => token,
        _ => {
            let token = generate_token();
            println!("admin token: {token}");
            token
        }
    };
    if let Some(stock) = args.seed_stock {
        let stock = crate::knobs::parse_stock(stock)?;
        let url = args.redis_url.clone();
        // Redis may not answer yet; keep trying in the background.
        tokio::spawn(async move {
            loop {
                match up::seed_stock(&url, stock).await {
                    Ok(()) => break,
                    Err(err) => tracing::warn!("seeding stock: {err:#}; retrying"),
                }
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        });
    }
    let app = Application::build(ServeConfig {
        listen: args.listen,
        redis_url: args.redis_url,
        instance: instance.clone(),
        admin_token,
        default_variant: args.default_variant,
    })
    .await?;
    // `up` and the tests wait for this line.
    println!(
        "instance {instance} listening on http://{}",
        app.local_addr()?
    );
    if args.exit_with_stdin {
        app.run_until(async {
            tokio::select! {
                _ = crate::server::shutdown_signal() => {}
                _ = crate::server::stdin_closed() => {}
            }
        })
        .await?;
    } else {
        app.run_until_stopped().await?;
    }
    Ok(())
}
