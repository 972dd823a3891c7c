//! Tracing set-up, once per process. Logs go to stderr so stdout stays free
//! for the lines other programs read (`listening on ...`, `admin token: ...`).

use tracing_subscriber::EnvFilter;

/// Installs a formatter filtered by `RUST_LOG` (default: `info`). Calling it
/// twice is harmless: the second call does nothing.
pub fn init(default_filter: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
