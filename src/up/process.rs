//! Child processes: starting them owned (each dies with `up`, and only `up`
//! signals it), requiring programs, waiting for their "ready" line, and
//! stopping them. Finding programs, free ports and signals are [`crate::os`]'s.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use anyhow::{Context, bail};
use nix::sys::signal::Signal;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

use crate::os::{find_program, signal};

/// This binary, once `up` has said its children are to die with it.
static WRAPPER: OnceLock<PathBuf> = OnceLock::new();

/// From now on every [`command`] starts its program through this binary's
/// `__child` wrapper, which has the kernel SIGKILL it when this process
/// dies, however it dies. `up` calls it first; a library user (a test
/// starting a Redis) runs its children plainly.
pub fn children_die_with_us() -> anyhow::Result<()> {
    let binary = std::env::current_exe().context("cannot find this program's own path")?;
    let _ = WRAPPER.set(binary);
    Ok(())
}

/// A command for `program`, in a process group of its own: a Ctrl-C at the
/// terminal reaches `up` alone, which stops its children itself (the whole
/// group's SIGINT would race the supervisor's restarts). Under `up`, through
/// the `__child` wrapper (see [`children_die_with_us`]): the process keeps
/// the pid the wrapper had, so signalling the child reaches the program.
///
/// The kernel's death signal follows the *thread* that spawned the child:
/// these are spawned from `up`'s main thread and tokio's worker threads,
/// which all live as long as `up` (never from `spawn_blocking`).
pub fn command(program: impl AsRef<OsStr>) -> Command {
    let mut command = command_in_our_group(program);
    command.process_group(0);
    command
}

/// A command for `program` in this process's group (a Ctrl-C at the
/// terminal reaches it too), through the `__child` wrapper once
/// [`children_die_with_us`] was called: `replay` and `explore` start their
/// `up` so, and a signal that kills them does not leave a stack behind.
pub fn command_in_our_group(program: impl AsRef<OsStr>) -> Command {
    match WRAPPER.get() {
        Some(wrapper) => {
            let mut command = Command::new(wrapper);
            command
                .arg("__child")
                .arg("--parent")
                .arg(std::process::id().to_string())
                .arg(program.as_ref())
                .arg("--");
            command
        }
        None => Command::new(program),
    }
}

/// A command for `program` run as another user (`uid`, `gid`): in a process
/// group of its own, but never through the `__child` wrapper. The kernel
/// forgets a death signal when a process's credentials change, and the
/// other user may not even be allowed to run this binary (a checkout under
/// `/root`). Such a child is held by a [`guard_group`] instead
/// ([`Running::guarded`]).
pub fn command_as(program: impl AsRef<OsStr>, uid: u32, gid: u32) -> Command {
    let mut command = Command::new(program);
    command.process_group(0).uid(uid).gid(gid);
    command
}

/// Under `up` (see [`children_die_with_us`]), a guard that SIGKILLs process
/// group `group` when `up` dies: for a child whose own children (nginx's
/// workers) no death signal reaches. SIGKILLed itself when dropped, doing
/// nothing then.
pub fn guard_group(group: u32) -> anyhow::Result<Option<Child>> {
    let Some(wrapper) = WRAPPER.get() else {
        return Ok(None);
    };
    let guard = Command::new(wrapper)
        .arg("__guard-group")
        .arg("--parent")
        .arg(std::process::id().to_string())
        .arg("--group")
        .arg(group.to_string())
        .stdin(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .context("cannot start a process group's guard")?;
    Ok(Some(guard))
}

/// The hidden subcommands [`command`] and [`guard_group`] run, before any
/// runtime or thread exists.
#[derive(clap::Subcommand, Debug)]
pub enum Owned {
    /// (internal) Sets PR_SET_PDEATHSIG so that this process dies with
    /// `up` (even a SIGKILLed one), then becomes PROGRAM.
    #[command(name = "__child", hide = true)]
    Child {
        /// `up`'s pid: if it is already gone, do not start.
        #[arg(long)]
        parent: u32,
        program: std::ffi::OsString,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// (internal) SIGKILLs process group GROUP when `up` (PARENT) dies.
    #[command(name = "__guard-group", hide = true)]
    GuardGroup {
        #[arg(long)]
        parent: u32,
        #[arg(long)]
        group: u32,
    },
}

impl Owned {
    pub fn run(&self) -> std::process::ExitCode {
        let failed = match self {
            Owned::Child {
                parent,
                program,
                args,
            } => crate::os::exec_owned(*parent, program, args),
            Owned::GuardGroup { parent, group } => match crate::os::guard_group(*parent, *group) {
                Ok(()) => return std::process::ExitCode::SUCCESS,
                Err(err) => err,
            },
        };
        eprintln!("stocklock: {failed:#}");
        std::process::ExitCode::from(127)
    }
}

/// Finds a required program or says how to install it.
pub fn require_program(name: &str, package: &str) -> anyhow::Result<PathBuf> {
    find_program(name).with_context(|| {
        format!("{name} is not installed. Install it with:\n    sudo apt-get update && sudo apt-get install -y {package}")
    })
}

/// A child process and the tail of what it printed: every server `up`
/// starts is one (its own type derefs to it for these).
pub struct Running {
    child: Child,
    output: OutputTail,
    /// Kills the child's process group if `up` dies, for a child the
    /// `__child` wrapper cannot hold ([`command_as`]); killed with it.
    _guard: Option<Child>,
}

impl Running {
    pub fn new(child: Child, output: OutputTail) -> Self {
        Self {
            child,
            output,
            _guard: None,
        }
    }

    /// The same, its process group SIGKILLed if `up` dies (under `up`; a
    /// library user's child is left as it is).
    pub fn guarded(mut self) -> anyhow::Result<Self> {
        if let Some(pid) = self.pid() {
            self._guard = guard_group(pid)?;
        }
        Ok(self)
    }

    /// The process id (`None` once it has been reaped).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// What it printed (the last lines).
    pub fn log(&self) -> String {
        self.output.text()
    }

    /// Stops it (SIGTERM, then SIGKILL after 5 s) and waits until it has exited.
    pub async fn stop(&mut self) {
        stop(&mut self.child, Duration::from_secs(5)).await;
    }

    /// Stops it with `signal` (the one a server reads as "stop now", when
    /// that is not SIGTERM), then SIGKILL after 5 s, and waits until it has
    /// exited.
    pub async fn stop_with(&mut self, signal: Signal) {
        stop_with(&mut self.child, signal, Duration::from_secs(5)).await;
    }

    /// Kills it at once (SIGKILL) and reaps it: a crash.
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }

    /// Resolves when it exits by itself (or is killed by someone else).
    pub async fn exited(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.child.wait().await
    }

    /// Its exit status if it has exited, without waiting.
    pub fn has_exited(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        self.child.try_wait()
    }
}

/// Gives a server type `pid`, `log`, `stop`, ... of its [`Running`] field
/// `process`.
macro_rules! runs_as_process {
    ($server:ty) => {
        impl std::ops::Deref for $server {
            type Target = $crate::up::process::Running;
            fn deref(&self) -> &Self::Target {
                &self.process
            }
        }
        impl std::ops::DerefMut for $server {
            fn deref_mut(&mut self) -> &mut Self::Target {
                &mut self.process
            }
        }
    };
}
pub(crate) use runs_as_process;

/// The last lines a child printed, kept for error messages.
#[derive(Clone, Default)]
pub struct OutputTail(Arc<Mutex<Vec<String>>>);

impl OutputTail {
    const KEEP: usize = 200;

    fn push(&self, line: String) {
        let mut lines = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.len() == Self::KEEP {
            lines.remove(0);
        }
        lines.push(line);
    }

    /// Everything kept, one line each.
    pub fn text(&self) -> String {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .join("\n")
    }
}

/// Reads `output` line by line in a task, keeping the tail, optionally
/// echoing each line, and sending the first line that contains `ready` (if
/// any) through the returned receiver.
pub fn watch_output<R>(
    output: R,
    ready: Option<&'static str>,
    echo: Option<String>,
) -> (OutputTail, oneshot::Receiver<String>)
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let tail = OutputTail::default();
    let (tx, rx) = oneshot::channel();
    let kept = tail.clone();
    tokio::spawn(async move {
        let mut tx = Some(tx);
        let mut lines = BufReader::new(output).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(prefix) = &echo {
                say!("{prefix}{line}");
            }
            if let Some(needle) = ready
                && line.contains(needle)
                && let Some(tx) = tx.take()
            {
                let _ = tx.send(line.clone());
            }
            kept.push(line);
        }
    });
    (tail, rx)
}

/// Waits for a child's ready line, failing with its output if it exits or
/// stays silent for `timeout`.
pub async fn wait_ready(
    child: &mut Child,
    ready: oneshot::Receiver<String>,
    tail: &OutputTail,
    what: &str,
    timeout: Duration,
) -> anyhow::Result<String> {
    tokio::select! {
        line = ready => match line {
            Ok(line) => Ok(line),
            Err(_) => {
                let status = child.wait().await?;
                bail!("{what} exited ({status}) before it was ready:\n{}", tail.text())
            }
        },
        status = child.wait() => {
            let status = status?;
            bail!("{what} exited ({status}) before it was ready:\n{}", tail.text())
        }
        _ = tokio::time::sleep(timeout) => {
            bail!("{what} was not ready after {timeout:?}:\n{}", tail.text())
        }
    }
}

/// Asks a child to stop with SIGTERM, and kills it if it has not exited
/// after `grace`.
pub async fn stop(child: &mut Child, grace: Duration) {
    stop_with(child, Signal::SIGTERM, grace).await;
}

/// Asks a child to stop with `first`, and kills it if it has not exited
/// after `grace`.
pub async fn stop_with(child: &mut Child, first: Signal, grace: Duration) {
    let Some(pid) = child.id() else {
        return; // already reaped
    };
    signal(pid, first);
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        signal(pid, Signal::SIGKILL);
        let _ = child.wait().await;
    }
}
