//! `--target`: a running chaos-mode stack the commands that play on a
//! stack (`lab`, `replay`, `explore`, `soak`) use instead of their own.

/// `--target URL --admin-token T --redis-url R`: a running chaos-mode
/// stack to use instead of one of the command's own (`lab`, `replay`,
/// `explore`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TargetArgs {
    /// Use this running stack (nginx URL) instead of starting one. It must
    /// run `stocklock up --chaos` with two instances or more; needs
    /// --admin-token and --redis-url. lab skips redis-restart there (and
    /// clock-skew sets instance b's clock itself); replay and explore hold
    /// only their own buyers at gates, never the stack's other users.
    #[arg(long, requires_all = ["admin_token", "redis_url"])]
    pub target: Option<String>,
    /// The target stack's admin token (stocklock up prints it).
    #[arg(long, env = "STOCKLOCK_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// The target stack's Redis (stocklock up prints it).
    #[arg(long)]
    pub redis_url: Option<String>,
}
