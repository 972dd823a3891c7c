//! What `stocklock load` shows while a run is under way: a progress bar on
//! a terminal, a line a second otherwise (logs and CI).

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use super::engine::Progress;

/// Runs `work` while showing `progress` on stderr: a bar on a terminal, a
/// line a second otherwise (logs and CI).
pub(super) async fn with_progress<T>(
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
