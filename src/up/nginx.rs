//! nginx in front of the instances, from the template in `nginx/nginx.conf`.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::process::Command;

use super::process::{self, Running};

/// The template, compiled in so `up` works from any directory.
pub const TEMPLATE: &str = include_str!("../../nginx/nginx.conf");

/// How long nginx may take to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Who may reach `/api/admin/` under `stocklock up`: this machine only.
pub const LOOPBACK_ONLY: &str = "allow 127.0.0.1; allow ::1;";

/// Fills in the template's placeholders; `admin_allow` is nginx `allow`
/// lines for `/api/admin/` ([`LOOPBACK_ONLY`] under `up`; the compose file
/// sets its own).
pub fn render(listen: &str, upstreams: &[SocketAddr], run_dir: &Path, admin_allow: &str) -> String {
    let servers: Vec<String> = upstreams
        .iter()
        .map(|addr| format!("server {addr} max_fails=1 fail_timeout=1s;"))
        .collect();
    TEMPLATE
        .replace("${STOCKLOCK_LISTEN}", listen)
        .replace("${STOCKLOCK_UPSTREAMS}", &servers.join("\n        "))
        .replace("${STOCKLOCK_RUN_DIR}", &run_dir.display().to_string())
        .replace("${STOCKLOCK_ADMIN_ALLOW}", admin_allow)
}

/// A running nginx master process.
pub struct Nginx {
    process: Running,
    /// SIGKILLs the workers if `up` dies (see [`process::guard_group`]).
    _workers_guard: Option<tokio::process::Child>,
    /// What the config is rendered from again on a reload.
    run_dir: std::path::PathBuf,
    listen: SocketAddr,
    admin_allow: String,
}

process::runs_as_process!(Nginx);

impl Drop for Nginx {
    /// Dropped without [`Running::stop`] (a failed start, a panicking
    /// test): the master is SIGKILLed by its handle, and its workers,
    /// which would outlive it, with it: they are in its process group.
    ///
    /// [`Running::stop`]: super::process::Running::stop
    fn drop(&mut self) {
        if let Some(pid) = self.process.pid() {
            let group = nix::unistd::Pid::from_raw(pid as i32);
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

impl Nginx {
    /// Writes the config into `run_dir`, checks it with `nginx -t`, starts
    /// nginx, and waits until `listen` accepts connections. `/api/admin/`
    /// from loopback only.
    pub async fn start(
        run_dir: &Path,
        listen: SocketAddr,
        upstreams: &[SocketAddr],
    ) -> anyhow::Result<Self> {
        Self::start_with(run_dir, listen, upstreams, LOOPBACK_ONLY).await
    }

    /// [`Nginx::start`] with `/api/admin/` open to `admin_allow` (nginx
    /// `allow` lines, as the compose file renders the template).
    pub async fn start_with(
        run_dir: &Path,
        listen: SocketAddr,
        upstreams: &[SocketAddr],
        admin_allow: &str,
    ) -> anyhow::Result<Self> {
        let binary = process::require_program("nginx", "nginx-light")?;
        let conf = write_checked_config(&binary, run_dir, listen, upstreams, admin_allow).await?;
        let error_log = run_dir.join("error.log");

        let mut child = process::command(&binary)
            .args(nginx_paths(run_dir, &error_log, &conf))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // Its own process group, workers included (see `Drop`).
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot run {}", binary.display()))?;
        let stderr = child.stderr.take().context("nginx stderr")?;
        let (output, _) = process::watch_output(stderr, None, Some("nginx: ".to_owned()));
        let workers_guard = match child.id() {
            Some(pid) => process::guard_group(pid)?,
            None => None,
        };

        // nginx says nothing when it is ready; its port answering is the
        // event, once the socket that answers is ours: a port picked as
        // free may meanwhile belong to another nginx, which would answer in
        // our stead while ours fails to bind and exits.
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait()? {
                let log = std::fs::read_to_string(&error_log).unwrap_or_default();
                bail!(
                    "nginx exited ({status}) at start:\n{}\n{log}",
                    output.text()
                );
            }
            let answers = tokio::net::TcpStream::connect(listen).await.is_ok();
            if answers
                && child
                    .id()
                    .is_some_and(|pid| crate::os::listens_on(pid, listen))
            {
                return Ok(Self {
                    process: Running::new(child, output),
                    _workers_guard: workers_guard,
                    run_dir: run_dir.to_owned(),
                    listen,
                    admin_allow: admin_allow.to_owned(),
                });
            }
            if tokio::time::Instant::now() > deadline {
                bail!("nginx did not accept connections on {listen} within {READY_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    /// Sends new requests to `upstreams` from now on: rewrites the config,
    /// checks it, SIGHUPs nginx and returns once every worker of the old
    /// config is gone (an old worker would still pass requests to an
    /// upstream that is no longer ours).
    pub async fn reload(&mut self, upstreams: &[SocketAddr]) -> anyhow::Result<()> {
        let binary = process::require_program("nginx", "nginx-light")?;
        write_checked_config(
            &binary,
            &self.run_dir,
            self.listen,
            upstreams,
            &self.admin_allow,
        )
        .await?;
        let master = self.pid().context("nginx has exited")?;
        let old_workers = crate::os::children_of(master);
        crate::os::signal(master, nix::sys::signal::Signal::SIGHUP);
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        loop {
            let workers = crate::os::children_of(master);
            if !workers.is_empty() && !workers.iter().any(|w| old_workers.contains(w)) {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                bail!("nginx's old workers still run {READY_TIMEOUT:?} after a reload");
            }
            // No event says a worker exited: it is not our child.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Where nginx keeps its files (prefix), logs its errors and reads its
/// config: the same for the server and for the check of its config.
fn nginx_paths<'a>(
    run_dir: &'a Path,
    error_log: &'a Path,
    conf: &'a Path,
) -> [&'a std::ffi::OsStr; 6] {
    [
        "-p".as_ref(),
        run_dir.as_os_str(),
        "-e".as_ref(),
        error_log.as_os_str(),
        "-c".as_ref(),
        conf.as_os_str(),
    ]
}

/// Renders the config into `run_dir` and has nginx check it (`nginx -t`);
/// its path.
async fn write_checked_config(
    binary: &Path,
    run_dir: &Path,
    listen: SocketAddr,
    upstreams: &[SocketAddr],
    admin_allow: &str,
) -> anyhow::Result<std::path::PathBuf> {
    let conf = run_dir.join("nginx.conf");
    let config = render(&listen.to_string(), upstreams, run_dir, admin_allow);
    std::fs::write(&conf, config)?;
    let error_log = run_dir.join("error.log");

    let check = Command::new(binary)
        .arg("-t")
        .arg("-q")
        .args(nginx_paths(run_dir, &error_log, &conf))
        .output()
        .await
        .with_context(|| format!("cannot run {}", binary.display()))?;
    if !check.status.success() {
        bail!(
            "nginx refused the generated config {}:\n{}",
            conf.display(),
            String::from_utf8_lossy(&check.stderr)
        );
    }
    Ok(conf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_fills_every_placeholder() {
        let upstreams: Vec<SocketAddr> = vec![
            "127.0.0.1:4001".parse().unwrap(),
            "127.0.0.1:4002".parse().unwrap(),
        ];
        let conf = render(
            "127.0.0.1:8080",
            &upstreams,
            Path::new("/tmp/x"),
            LOOPBACK_ONLY,
        );
        assert!(!conf.contains("${STOCKLOCK_"), "{conf}");
        assert!(conf.contains("server 127.0.0.1:4001 max_fails=1 fail_timeout=1s;"));
        assert!(conf.contains("server 127.0.0.1:4002 "));
        assert!(conf.contains("listen 127.0.0.1:8080"));
        assert!(conf.contains("pid /tmp/x/nginx.pid"));
        assert!(conf.contains("allow 127.0.0.1; allow ::1;\n            deny all;"));
    }
}
